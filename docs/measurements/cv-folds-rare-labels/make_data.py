"""Synthetic marketplace catalogue for a ucse trial (seeded, deterministic).

Writes:
  catalog_train.csv   ~3,000 rows, columns: title, category   (as a marketplace export would name them)
  catalog_test.csv    ~500 labelled rows, same columns, never in training
  unlabelled.txt      100 titles, one per line, 15 of them off-topic
  mistake files (see bottom)
"""
import csv
import random

rng = random.Random(20261129)

BRANDS = ["Acme", "Nordvik", "Zentro", "Lumo", "Kestrel", "Orbia", "Brava", "Tekka", "Vallo", "Hexa", "Sunny&Co",
          "Pro-Line", "GreenLeaf", "Urbanist", "K2X", "Moda", "Fjell", "Casa Bella", "Voltix", "PetPal"]
COLORS = ["black", "white", "navy", "red", "grey", "beige", "olive", "pink", "blue", "Schwarz", "negro", "rose gold"]
SIZES_CLOTH = ["XS", "S", "M", "L", "XL", "XXL", "3XL", "Gr. 42", "EU 38", "talla M", "134/140", "6-7Y"]
PACKS = ["2-pack", "3er Pack", "pack of 6", "x12", "10 pcs", "set of 4", "1 Stk", "lote 3"]
VOLS = ["500ml", "1L", "250 ml", "75cl", "1.5L", "330ml", "2x500ml", "100g", "1kg", "250g"]


def sku():
    return rng.choice(["SKU", "ART", "REF", "#", "Nr.", ""]) + \
        f"{rng.choice('ABCDEFGHKMNPRSTXZ')}{rng.choice('ABCDEFGHKMNPRSTXZ')}-{rng.randint(100, 99999)}"


# ---------------------------------------------------------------------------------------------------------------
# Leaf categories: (path, english core phrases, german/spanish phrases, attribute kind)
# ---------------------------------------------------------------------------------------------------------------
LEAVES = []


def leaf(path, en, foreign=(), kind="generic"):
    LEAVES.append((path, list(en), list(foreign), kind))


# Clothing: near-duplicates across segments
seg = {"Men's": ("men's", "herren", "hombre"), "Women's": ("women's", "damen", "mujer"),
       "Boys'": ("boys", "jungen", "niño"), "Girls'": ("girls", "mädchen", "niña")}
cloth = {"T-Shirts": (["t-shirt", "tee", "crew neck tee", "v-neck t shirt"], ["T-Shirt", "camiseta"]),
         "Jeans": (["jeans", "denim jeans", "slim fit jeans", "straight leg denim"], ["Jeans Hose", "vaqueros"]),
         "Jackets & Coats": (["winter jacket", "rain coat", "puffer jacket", "parka"], ["Winterjacke", "chaqueta"]),
         "Socks": (["socks", "ankle socks", "crew socks", "wool socks"], ["Socken", "calcetines"]),
         "Hoodies/Sweatshirts": (["hoodie", "sweatshirt", "zip hoodie", "pullover hoodie"], ["Kapuzenpullover", "sudadera"]),
         "Swimwear": (["swim shorts", "swimsuit", "bikini", "board shorts"], ["Badehose", "bañador"]),
         "Sneakers": (["sneakers", "trainers", "running shoes", "canvas shoes"], ["Turnschuhe", "zapatillas"]),
         "Pajamas": (["pajama set", "pyjamas", "sleepwear set", "lounge pants"], ["Schlafanzug", "pijama"])}
for s, (sw, sde, ses) in seg.items():
    for c, (en, fo) in cloth.items():
        leaf(f"Clothing, Shoes & Accessories > {s} > {c}", [f"{sw} {e}" for e in en] + en[:1],
             [f"{fo[0]} {sde}", f"{fo[1]} {ses}"], "cloth")
for c, en in {"Dresses": ["summer dress", "maxi dress", "midi dress", "cocktail dress"],
              "Skirts": ["pleated skirt", "mini skirt", "denim skirt"],
              "Leggings": ["leggings", "yoga leggings", "high waist leggings"],
              "Bras": ["bra", "sports bra", "push-up bra"]}.items():
    leaf(f"Clothing, Shoes & Accessories > Women's > {c}", en, [], "cloth")
for c, en in {"Belts": ["leather belt", "canvas belt"], "Wallets": ["wallet", "rfid wallet", "card holder"],
              "Sunglasses": ["sunglasses", "polarized sunglasses"], "Watches": ["analog watch", "wrist watch"],
              "Backpacks": ["backpack", "laptop backpack", "daypack 20L"], "Hats/Caps": ["baseball cap", "beanie", "bucket hat"],
              "Scarves": ["scarf", "wool scarf"], "Umbrellas": ["umbrella", "compact umbrella"]}.items():
    leaf(f"Clothing, Shoes & Accessories > Accessories > {c}", en, [], "generic")

# Electronics: phone cases per model (very near duplicates)
for m in ["iPhone 13", "iPhone 14", "iPhone 15", "iPhone 15 Pro", "Galaxy S23", "Galaxy S24", "Pixel 8", "Galaxy A54",
          "Redmi Note 12", "iPad Air", "iPad 10th Gen", "Galaxy Tab S9"]:
    leaf(f"Electronics > Phones/Tablets > Cases/Covers > {m}", [f"case for {m}", f"{m} case", f"{m} cover",
                                                                f"{m} silicone case", f"shockproof {m} case"],
         [f"Hülle für {m}", f"funda {m}"], "tech")
    leaf(f"Electronics > Phones/Tablets > Screen Protectors > {m}", [f"{m} screen protector", f"tempered glass {m}",
                                                                     f"{m} glass film"], [f"Panzerglas {m}"], "tech")
for c, en, fo in [
    ("Chargers/Power Adapters", ["usb-c charger", "65W GaN charger", "wall charger", "fast charger 20W"], ["Ladegerät", "cargador"]),
    ("Cables > USB-C", ["usb-c cable", "usb c to c cable 1m", "type-c charging cable"], ["USB-C Kabel", "cable usb-c"]),
    ("Cables > Lightning", ["lightning cable", "iphone charging cable", "mfi lightning cable"], ["Lightning Kabel"]),
    ("Cables > HDMI", ["hdmi cable", "hdmi 2.1 cable 8k", "high speed hdmi"], ["HDMI Kabel"]),
    ("Power Banks", ["power bank 10000mAh", "portable charger", "magsafe power bank"], ["Powerbank", "batería externa"]),
    ("Headphones > Over-Ear", ["over-ear headphones", "noise cancelling headphones", "wireless headphones"], ["Kopfhörer"]),
    ("Headphones > In-Ear/Earbuds", ["wireless earbuds", "in-ear headphones", "bluetooth earbuds"], ["auriculares inalámbricos"]),
    ("Speakers > Bluetooth", ["bluetooth speaker", "portable speaker waterproof", "mini speaker"], ["Lautsprecher", "altavoz"]),
    ("Smartwatches", ["smartwatch", "fitness tracker watch", "smart watch"], ["reloj inteligente"]),
    ("Smartwatch Bands", ["watch band 41mm", "silicone strap for smartwatch", "replacement band"], ["Armband"]),
    ("Memory Cards", ["microSD card 128GB", "SD card 64GB", "memory card"], ["Speicherkarte", "tarjeta de memoria"]),
    ("USB Flash Drives", ["usb stick 64GB", "flash drive", "usb 3.0 pen drive"], ["USB-Stick"]),
    ("Computer Keyboards", ["mechanical keyboard", "wireless keyboard", "keyboard qwertz"], ["Tastatur", "teclado"]),
    ("Computer Mice", ["wireless mouse", "gaming mouse", "ergonomic mouse"], ["Maus", "ratón"]),
    ("Monitors", ["27 inch monitor", "4k monitor", "curved monitor"], ["Bildschirm"]),
    ("Webcams", ["webcam 1080p", "hd webcam with mic"], ["cámara web"]),
    ("Laptop Sleeves", ["laptop sleeve 14 inch", "notebook sleeve", "macbook sleeve"], ["Laptoptasche"]),
    ("Smart Home > Smart Plugs", ["smart plug", "wifi plug", "smart socket"], ["WLAN Steckdose", "enchufe inteligente"]),
    ("Smart Home > Smart Bulbs", ["smart bulb E27", "wifi led bulb rgb"], ["smarte Glühbirne"]),
    ("Smart Home > Security Cameras", ["security camera", "wifi ip camera", "outdoor camera"], ["Überwachungskamera"]),
    ("Batteries", ["AA batteries", "AAA batteries", "rechargeable batteries"], ["Batterien", "pilas"]),
    ("Car Electronics > Dash Cams", ["dash cam", "car camera"], ["Dashcam"]),
    ("Car Electronics > Car Chargers", ["car charger usb-c", "12v car charger"], ["Kfz Ladegerät"]),
    ("Car Electronics > Phone Holders", ["car phone holder", "magnetic car mount", "vent phone mount"], ["Handyhalterung Auto", "soporte móvil coche"]),
]:
    leaf(f"Electronics > {c}", en, fo, "tech")

# Home & Garden
for c, en, fo in [
    ("Lights, Lamps > Desk Lamps", ["led desk lamp", "reading lamp", "table lamp"], ["Schreibtischlampe", "lámpara de escritorio"]),
    ("Lights, Lamps > Floor Lamps", ["floor lamp", "arc floor lamp", "standing lamp"], ["Stehlampe"]),
    ("Lights, Lamps > String/Fairy Lights", ["fairy lights", "string lights 10m", "led string lights"], ["Lichterkette", "guirnalda luces"]),
    ("Lights, Lamps > Ceiling Lights", ["ceiling light", "led ceiling lamp", "pendant light"], ["Deckenleuchte"]),
    ("Lights, Lamps > Solar Garden Lights", ["solar garden lights", "solar path lights", "solar lamp outdoor"], ["Solarleuchte"]),
    ("Kitchen > Knives", ["chef knife", "kitchen knife set", "santoku knife"], ["Küchenmesser", "cuchillo"]),
    ("Kitchen > Pans/Skillets", ["frying pan 28cm", "non-stick pan", "cast iron skillet"], ["Bratpfanne", "sartén"]),
    ("Kitchen > Pots", ["cooking pot", "stock pot", "saucepan"], ["Kochtopf", "olla"]),
    ("Kitchen > Cutting Boards", ["cutting board", "bamboo chopping board"], ["Schneidebrett", "tabla de cortar"]),
    ("Kitchen > Coffee Makers", ["coffee maker", "drip coffee machine", "espresso machine"], ["Kaffeemaschine", "cafetera"]),
    ("Kitchen > Kettles", ["electric kettle", "kettle 1.7L", "glass kettle"], ["Wasserkocher", "hervidor"]),
    ("Kitchen > Blenders", ["blender", "smoothie blender", "hand blender"], ["Mixer", "batidora"]),
    ("Kitchen > Food Storage", ["food storage containers", "glass meal prep containers", "lunch box"], ["Frischhaltedosen", "tupper"]),
    ("Kitchen > Mugs & Cups", ["coffee mug", "ceramic mug", "travel mug"], ["Kaffeebecher", "taza"]),
    ("Kitchen > Water Bottles", ["water bottle", "insulated bottle", "sports bottle"], ["Trinkflasche", "botella de agua"]),
    ("Kitchen > Baking Tools", ["baking tray", "silicone baking mat", "cake tin"], ["Backblech", "molde"]),
    ("Kitchen > Utensils", ["spatula set", "silicone utensils", "whisk"], ["Pfannenwender"]),
    ("Bedding > Duvet Covers", ["duvet cover set", "bedding set 200x200"], ["Bettwäsche", "funda nórdica"]),
    ("Bedding > Pillows", ["pillow", "memory foam pillow"], ["Kopfkissen", "almohada"]),
    ("Bedding > Blankets/Throws", ["throw blanket", "fleece blanket"], ["Kuscheldecke", "manta"]),
    ("Bath > Towels", ["bath towel", "towel set", "microfibre towel"], ["Handtuch", "toalla"]),
    ("Bath > Shower Heads", ["shower head", "rain shower head"], ["Duschkopf", "alcachofa ducha"]),
    ("Bath > Bath Mats", ["bath mat", "non-slip bath rug"], ["Badematte"]),
    ("Storage > Baskets/Bins", ["storage basket", "storage box with lid", "woven basket"], ["Aufbewahrungskorb", "cesta"]),
    ("Storage > Hangers", ["clothes hangers", "velvet hangers"], ["Kleiderbügel", "perchas"]),
    ("Cleaning > Vacuum Cleaners", ["vacuum cleaner", "cordless vacuum", "robot vacuum"], ["Staubsauger", "aspiradora"]),
    ("Cleaning > Mops/Brooms", ["spin mop", "broom and dustpan", "microfibre mop"], ["Wischmopp", "fregona"]),
    ("Cleaning > Detergents", ["laundry detergent", "washing liquid", "dish soap"], ["Waschmittel", "detergente"]),
    ("Decor > Picture Frames", ["picture frame 10x15", "photo frame", "collage frame"], ["Bilderrahmen", "marco de fotos"]),
    ("Decor > Candles", ["scented candle", "soy candle", "tea lights"], ["Duftkerze", "vela aromática"]),
    ("Decor > Wall Clocks", ["wall clock", "silent wall clock"], ["Wanduhr", "reloj de pared"]),
    ("Decor > Artificial Plants", ["artificial plant", "fake eucalyptus", "faux plant"], ["Kunstpflanze", "planta artificial"]),
    ("Garden > Hoses", ["garden hose 20m", "expandable hose"], ["Gartenschlauch", "manguera"]),
    ("Garden > Planters/Pots", ["plant pot", "planter", "ceramic flower pot"], ["Blumentopf", "maceta"]),
    ("Garden > Seeds", ["tomato seeds", "herb seeds", "flower seeds mix"], ["Samen", "semillas"]),
    ("Garden > Pruners/Shears", ["pruning shears", "hedge shears", "secateurs"], ["Gartenschere", "tijeras de podar"]),
    ("Garden > Garden Furniture", ["garden chair", "patio table", "folding bench"], ["Gartenstuhl", "silla de jardín"]),
    ("Garden > BBQ/Grills", ["charcoal grill", "bbq grill", "gas barbecue"], ["Grill", "barbacoa"]),
]:
    leaf(f"Home & Garden > {c}", en, fo, "home")

# Beauty & Personal Care
for c, en, fo in [
    ("Hair Care > Shampoo", ["shampoo", "anti-dandruff shampoo", "sulfate free shampoo"], ["champú"]),
    ("Hair Care > Conditioner", ["conditioner", "hair conditioner", "leave-in conditioner"], ["Spülung", "acondicionador"]),
    ("Hair Care > Hair Dryers", ["hair dryer", "ionic hair dryer"], ["Haartrockner", "secador"]),
    ("Hair Care > Straighteners", ["hair straightener", "flat iron"], ["Glätteisen", "plancha de pelo"]),
    ("Skin Care > Face Cream", ["face cream", "moisturizer", "night cream"], ["Gesichtscreme", "crema facial"]),
    ("Skin Care > Sunscreen", ["sunscreen spf 50", "sun lotion", "sun cream"], ["Sonnencreme", "protector solar"]),
    ("Skin Care > Serums", ["vitamin c serum", "hyaluronic serum"], ["Serum"]),
    ("Makeup > Lipstick", ["lipstick", "matte lipstick", "lip gloss"], ["Lippenstift", "pintalabios"]),
    ("Makeup > Mascara", ["mascara", "waterproof mascara"], ["Wimperntusche", "máscara de pestañas"]),
    ("Makeup > Foundation", ["foundation", "liquid foundation", "bb cream"], ["Make-up", "base de maquillaje"]),
    ("Nails > Nail Polish", ["nail polish", "gel nail polish"], ["Nagellack", "esmalte de uñas"]),
    ("Fragrance > Perfume (Women)", ["eau de parfum women", "perfume for her"], ["Parfüm Damen", "perfume mujer"]),
    ("Fragrance > Cologne (Men)", ["eau de toilette men", "cologne for him"], ["Parfüm Herren", "colonia hombre"]),
    ("Shaving > Razors", ["razor", "safety razor", "razor blades"], ["Rasierer", "cuchillas"]),
    ("Shaving > Electric Shavers", ["electric shaver", "beard trimmer"], ["Elektrorasierer", "afeitadora"]),
    ("Oral Care > Toothbrushes", ["electric toothbrush", "toothbrush", "replacement brush heads"], ["Zahnbürste", "cepillo de dientes"]),
    ("Oral Care > Toothpaste", ["toothpaste", "whitening toothpaste"], ["Zahnpasta", "pasta de dientes"]),
    ("Bath & Body > Shower Gel", ["shower gel", "body wash"], ["Duschgel", "gel de ducha"]),
    ("Bath & Body > Deodorant", ["deodorant", "roll-on deodorant", "antiperspirant spray"], ["Deo", "desodorante"]),
]:
    leaf(f"Beauty & Personal Care > {c}", en, fo, "beauty")

# Grocery
for c, en, fo in [
    ("Coffee > Beans", ["coffee beans", "espresso beans", "whole bean coffee"], ["Kaffeebohnen", "café en grano"]),
    ("Coffee > Ground", ["ground coffee", "filter coffee"], ["gemahlener Kaffee", "café molido"]),
    ("Coffee > Capsules/Pods", ["coffee capsules", "coffee pods compatible"], ["Kaffeekapseln", "cápsulas de café"]),
    ("Tea", ["green tea", "black tea bags", "herbal tea"], ["Tee", "té"]),
    ("Oils & Vinegars", ["extra virgin olive oil", "olive oil", "balsamic vinegar"], ["Olivenöl", "aceite de oliva"]),
    ("Pasta & Rice", ["spaghetti", "penne pasta", "basmati rice"], ["Nudeln", "arroz"]),
    ("Chocolate & Sweets", ["dark chocolate", "milk chocolate bar", "gummy bears"], ["Schokolade", "chocolate"]),
    ("Snacks > Chips/Crisps", ["potato chips", "tortilla chips", "crisps"], ["Chips", "patatas fritas"]),
    ("Snacks > Nuts", ["roasted almonds", "mixed nuts", "cashews"], ["Nüsse", "frutos secos"]),
    ("Drinks > Energy Drinks", ["energy drink", "energy drink sugar free"], ["Energydrink", "bebida energética"]),
    ("Drinks > Mineral Water", ["mineral water", "sparkling water"], ["Mineralwasser", "agua mineral"]),
    ("Drinks > Juice", ["orange juice", "apple juice"], ["Saft", "zumo"]),
    ("Spices & Seasonings", ["black pepper", "smoked paprika", "spice mix"], ["Gewürz", "especias"]),
    ("Breakfast > Cereal", ["cereal", "granola", "muesli"], ["Müsli", "cereales"]),
    ("Sports Nutrition > Protein Powder", ["whey protein powder", "vegan protein"], ["Proteinpulver", "proteína en polvo"]),
]:
    leaf(f"Grocery & Gourmet > {c}", en, fo, "food")

# Toys (category names with quotes)
for c, en, fo in [
    ("Water Guns", ["water gun", "water blaster", "squirt gun"], ["Wasserpistole", "pistola de agua"]),
    ("Trampolines", ["trampoline 305cm", "garden trampoline"], ["Trampolin", "cama elástica"]),
    ("Sandbox Toys", ["sand toys set", "beach bucket and spade"], ["Sandspielzeug", "juguetes de arena"]),
    ("Kites", ["kite", "stunt kite"], ["Drachen", "cometa"]),
    ("Swings/Slides", ["swing set", "garden slide", "kids swing"], ["Schaukel", "columpio"]),
    ("Bubble Machines", ["bubble machine", "bubble wand"], ["Seifenblasen", "pompas de jabón"]),
]:
    leaf(f"Toys & Games > Kids' \"Outdoor\" Toys > {c}", en, fo, "toy")
for c, en, fo in [
    ("Board Games", ["board game", "strategy board game", "family game"], ["Brettspiel", "juego de mesa"]),
    ("Puzzles", ["1000 piece puzzle", "jigsaw puzzle"], ["Puzzle", "rompecabezas"]),
    ("Building Blocks", ["building blocks", "construction bricks set"], ["Bausteine", "bloques de construcción"]),
    ("Dolls", ["fashion doll", "baby doll"], ["Puppe", "muñeca"]),
    ("RC Cars", ["rc car", "remote control car", "rc truck 1:16"], ["ferngesteuertes Auto", "coche teledirigido"]),
    ("Plush Toys", ["plush toy", "teddy bear", "stuffed animal"], ["Kuscheltier", "peluche"]),
    ("Action Figures", ["action figure", "superhero figure"], ["Actionfigur", "figura de acción"]),
    ("Card Games", ["card game", "playing cards"], ["Kartenspiel", "juego de cartas"]),
]:
    leaf(f"Toys & Games > {c}", en, fo, "toy")

# Sports & Outdoors
for c, en, fo in [
    ("Fitness > Yoga Mats", ["yoga mat", "non-slip yoga mat 6mm"], ["Yogamatte", "esterilla de yoga"]),
    ("Fitness > Dumbbells", ["dumbbell set", "adjustable dumbbells", "hex dumbbell 10kg"], ["Hanteln", "mancuernas"]),
    ("Fitness > Resistance Bands", ["resistance bands", "pull up band"], ["Widerstandsbänder", "bandas elásticas"]),
    ("Cycling > Helmets", ["bike helmet", "cycling helmet"], ["Fahrradhelm", "casco de bicicleta"]),
    ("Cycling > Bike Lights", ["bike light set", "usb rechargeable bike light"], ["Fahrradlicht", "luz de bicicleta"]),
    ("Cycling > Bike Locks", ["bike lock", "u-lock"], ["Fahrradschloss", "candado bicicleta"]),
    ("Camping > Tents", ["2 person tent", "camping tent", "pop up tent"], ["Zelt", "tienda de campaña"]),
    ("Camping > Sleeping Bags", ["sleeping bag", "mummy sleeping bag"], ["Schlafsack", "saco de dormir"]),
    ("Camping > Headlamps", ["headlamp", "led head torch"], ["Stirnlampe", "linterna frontal"]),
    ("Fishing > Rods", ["fishing rod", "telescopic rod"], ["Angelrute", "caña de pescar"]),
    ("Fishing > Lures", ["fishing lures", "spinner lure set"], ["Köder", "señuelos"]),
    ("Team Sports > Footballs/Soccer Balls", ["football size 5", "soccer ball"], ["Fußball", "balón de fútbol"]),
    ("Team Sports > Basketballs", ["basketball", "outdoor basketball"], ["Basketball", "balón de baloncesto"]),
    ("Racket Sports > Tennis Rackets", ["tennis racket", "tennis racquet"], ["Tennisschläger", "raqueta de tenis"]),
    ("Racket Sports > Padel", ["padel racket", "padel balls"], ["Padelschläger", "pala de pádel"]),
    ("Swimming > Goggles", ["swim goggles", "anti-fog goggles"], ["Schwimmbrille", "gafas de natación"]),
]:
    leaf(f"Sports & Outdoors > {c}", en, fo, "sport")

# Pets
for c, en, fo in [
    ("Dogs > Dry Food", ["dry dog food", "dog kibble adult"], ["Hundetrockenfutter", "pienso perro"]),
    ("Dogs > Wet Food", ["wet dog food", "dog food cans"], ["Hundenassfutter", "comida húmeda perro"]),
    ("Dogs > Treats", ["dog treats", "dental chews"], ["Hundeleckerli", "premios perro"]),
    ("Dogs > Leashes/Collars", ["dog leash", "dog collar", "retractable leash"], ["Hundeleine", "correa perro"]),
    ("Dogs > Beds", ["dog bed", "orthopedic dog bed"], ["Hundebett", "cama perro"]),
    ("Dogs > Toys", ["dog toy", "chew toy", "squeaky toy"], ["Hundespielzeug", "juguete perro"]),
    ("Cats > Dry Food", ["dry cat food", "cat kibble"], ["Katzentrockenfutter", "pienso gato"]),
    ("Cats > Wet Food", ["wet cat food", "cat food pouches"], ["Katzennassfutter", "comida húmeda gato"]),
    ("Cats > Litter", ["cat litter", "clumping litter"], ["Katzenstreu", "arena para gatos"]),
    ("Cats > Scratching Posts", ["cat scratching post", "cat tree"], ["Kratzbaum", "rascador"]),
    ("Cats > Toys", ["cat toy", "feather wand", "cat tunnel"], ["Katzenspielzeug", "juguete gato"]),
    ("Fish > Aquarium Filters", ["aquarium filter", "fish tank filter"], ["Aquariumfilter", "filtro acuario"]),
    ("Fish > Fish Food", ["fish food flakes", "tropical fish food"], ["Fischfutter", "comida peces"]),
    ("Small Animals > Bedding", ["small animal bedding", "hamster bedding"], ["Kleintierstreu", "lecho hámster"]),
    ("Birds > Bird Seed", ["bird seed", "wild bird food"], ["Vogelfutter", "alpiste"]),
]:
    leaf(f"Pet Supplies > {c}", en, fo, "pet")

# Office
for c, en, fo in [
    ("Writing > Ballpoint Pens", ["ballpoint pen", "ball pens blue"], ["Kugelschreiber", "bolígrafo"]),
    ("Writing > Gel Pens", ["gel pens", "gel ink pen 0.5mm"], ["Gelstift", "bolígrafo de gel"]),
    ("Writing > Highlighters", ["highlighter", "highlighter pens pastel"], ["Textmarker", "subrayador"]),
    ("Writing > Pencils", ["pencils hb", "mechanical pencil"], ["Bleistift", "lápiz"]),
    ("Paper > Notebooks", ["notebook a5", "dotted notebook", "spiral notebook"], ["Notizbuch", "cuaderno"]),
    ("Paper > Printer Paper", ["printer paper a4", "copy paper 500 sheets"], ["Druckerpapier", "papel de impresora"]),
    ("Paper > Sticky Notes", ["sticky notes", "post-it notes"], ["Haftnotizen", "notas adhesivas"]),
    ("Desk > Staplers", ["stapler", "heavy duty stapler"], ["Hefter", "grapadora"]),
    ("Desk > Desk Organizers", ["desk organizer", "pen holder"], ["Schreibtisch-Organizer", "organizador"]),
    ("Filing > Binders/Folders", ["ring binder", "document folder", "lever arch file"], ["Ordner", "archivador"]),
    ("Office Chairs", ["office chair", "ergonomic desk chair"], ["Bürostuhl", "silla de oficina"]),
    ("Calculators", ["calculator", "scientific calculator"], ["Taschenrechner", "calculadora"]),
]:
    leaf(f"Office Products > {c}", en, fo, "office")
for b in ["HP", "Canon", "Epson", "Brother"]:
    leaf(f"Office Products > Printer Ink/Toner > {b}", [f"{b} ink cartridge", f"ink for {b} printer",
                                                      f"{b} compatible toner", f"{b} 302 XL ink"],
         [f"Druckerpatrone {b}", f"cartucho {b}"], "office")

# Automotive
for c, en, fo in [
    ("Wiper Blades", ["wiper blades", "windscreen wipers 600mm"], ["Scheibenwischer", "escobillas"]),
    ("Motor Oil > 5W-30", ["5W-30 motor oil", "engine oil 5w30"], ["Motoröl 5W-30", "aceite motor 5w30"]),
    ("Motor Oil > 5W-40", ["5W-40 motor oil", "engine oil 5w40"], ["Motoröl 5W-40", "aceite motor 5w40"]),
    ("Motor Oil > 0W-20", ["0W-20 motor oil", "engine oil 0w20"], ["Motoröl 0W-20"]),
    ("Car Care > Cleaning", ["car shampoo", "microfibre car cloth", "car wax"], ["Autoshampoo", "cera coche"]),
    ("Car Care > Air Fresheners", ["car air freshener", "vent clip freshener"], ["Autoduft", "ambientador coche"]),
    ("Tire Inflators", ["tire inflator", "portable air compressor"], ["Kompressor", "compresor"]),
    ("Jump Starters", ["jump starter", "car jump starter 2000A"], ["Starthilfe", "arrancador"]),
    ("Seat Covers", ["car seat covers", "seat cover set"], ["Sitzbezüge", "fundas asientos"]),
]:
    leaf(f"Automotive > {c}", en, fo, "auto")

# Tools
for c, en, fo in [
    ("Power Tools > Drills", ["cordless drill", "drill driver 18v", "hammer drill"], ["Akkuschrauber", "taladro"]),
    ("Power Tools > Saws", ["circular saw", "jigsaw tool", "mitre saw"], ["Kreissäge", "sierra"]),
    ("Power Tools > Sanders", ["orbital sander", "detail sander"], ["Schleifer", "lijadora"]),
    ("Hand Tools > Screwdrivers", ["screwdriver set", "precision screwdriver"], ["Schraubendreher", "destornillador"]),
    ("Hand Tools > Wrenches", ["wrench set", "adjustable wrench", "socket set"], ["Schraubenschlüssel", "llave inglesa"]),
    ("Hand Tools > Hammers", ["claw hammer", "rubber mallet"], ["Hammer", "martillo"]),
    ("Measuring > Tape Measures", ["tape measure 5m", "measuring tape"], ["Maßband", "cinta métrica"]),
    ("Measuring > Laser Levels", ["laser level", "cross line laser"], ["Kreuzlinienlaser", "nivel láser"]),
    ("Work Lights", ["led work light", "rechargeable work lamp"], ["Arbeitsleuchte", "foco de trabajo"]),
    ("Hardware > Screws/Anchors", ["wood screws assortment", "wall plugs"], ["Schrauben", "tornillos"]),
    ("Electrical > Extension Leads", ["extension lead 4 way", "power strip"], ["Steckdosenleiste", "regleta"]),
]:
    leaf(f"Tools & Home Improvement > {c}", en, fo, "tools")

# Baby
for c, en, fo in [
    ("Diapers/Nappies", ["diapers size 4", "nappies", "baby diapers"], ["Windeln", "pañales"]),
    ("Baby Wipes", ["baby wipes", "sensitive wipes"], ["Feuchttücher", "toallitas"]),
    ("Feeding > Bottles", ["baby bottle", "anti-colic bottle"], ["Babyflasche", "biberón"]),
    ("Feeding > High Chairs", ["high chair", "baby high chair"], ["Hochstuhl", "trona"]),
    ("Pacifiers", ["pacifier", "dummy 0-6m"], ["Schnuller", "chupete"]),
    ("Strollers", ["stroller", "pushchair", "travel system"], ["Kinderwagen", "carrito"]),
    ("Car Seats", ["baby car seat", "isofix car seat"], ["Kindersitz", "silla de coche"]),
    ("Baby Monitors", ["baby monitor", "video baby monitor"], ["Babyphone", "vigilabebés"]),
]:
    leaf(f"Baby > {c}", en, fo, "baby")

# Books/Media and misc to reach ~250
for c, en in [
    ("Books > Cookbooks", ["cookbook", "vegan cookbook", "baking book"]),
    ("Books > Children's Books", ["children's picture book", "bedtime stories book"]),
    ("Books > Notebooks & Journals (Gift)", ["gratitude journal", "travel journal"]),
    ("Music > Guitar Strings", ["guitar strings", "acoustic strings 12-53"]),
    ("Music > Ukuleles", ["ukulele", "soprano ukulele"]),
    ("Music > Headphone Amps/DACs", ["usb dac", "headphone amp"]),
    ("Video Games > Controllers", ["game controller", "wireless gamepad"]),
    ("Video Games > Gaming Headsets", ["gaming headset", "headset with mic"]),
    ("Party Supplies > Balloons", ["balloons", "helium balloons", "foil balloon"]),
    ("Party Supplies > Gift Wrap", ["gift wrap", "wrapping paper roll"]),
    ("Arts & Crafts > Paint", ["acrylic paint set", "watercolour paint"]),
    ("Arts & Crafts > Yarn", ["knitting yarn", "cotton yarn"]),
    ("Luggage > Suitcases", ["suitcase", "hard shell carry-on", "cabin luggage"]),
    ("Luggage > Travel Accessories", ["packing cubes", "travel adapter", "luggage tag"]),
    ("Health > Thermometers", ["digital thermometer", "forehead thermometer"]),
    ("Health > Blood Pressure Monitors", ["blood pressure monitor", "bp cuff"]),
    ("Health > Vitamins", ["vitamin d3", "multivitamin tablets", "magnesium capsules"]),
    ("Health > First Aid", ["first aid kit", "plasters assorted"]),
]:
    leaf(c, en, [], "generic")

assert len(LEAVES) == len({p for p, *_ in LEAVES}), "duplicate leaf path"
NL = len(LEAVES)

# ---------------------------------------------------------------------------------------------------------------
# Titles
# ---------------------------------------------------------------------------------------------------------------
ADJ = ["new", "premium", "2024", "original", "bestseller", "eco", "deluxe", "ultra", "heavy duty", "mini", "XXL",
       "NEU", "oferta", "pro", "compact", "SALE!!"]


def attr(kind):
    if kind == "cloth":
        return rng.choice([rng.choice(SIZES_CLOTH), rng.choice(COLORS), f"{rng.choice(COLORS)} {rng.choice(SIZES_CLOTH)}",
                           "100% cotton", "slim fit", rng.choice(PACKS)])
    if kind == "tech":
        return rng.choice(["black", "2m", "1m", "fast charging", "bluetooth 5.3", "usb-c", rng.choice(PACKS),
                           "with mic", "compatible", "v2"])
    if kind in ("food", "beauty"):
        return rng.choice(VOLS + PACKS + ["organic", "bio", "vegan", "sin gluten"])
    return rng.choice(COLORS + PACKS + ["30cm", "large", "small", "stainless steel", "wood", "set"])


def title(i):
    path, en, fo, kind = LEAVES[i]
    r = rng.random()
    core = rng.choice(en)
    b = rng.choice(BRANDS)
    if fo and r < 0.12:  # German/Spanish listing
        core = rng.choice(fo)
        t = rng.choice(["{b} {c} {a}", "{c} {a} - {b}", "{c} {a}"])
    elif r < 0.20:  # mostly SKU codes / sizes
        t = rng.choice(["{s} {a} {c}", "{s} {a} {a2}", "{b} {s} {a}", "{s} {c}"])
    else:
        t = rng.choice(["{b} {c} {a}", "{b} {adj} {c}, {a}", "{c} - {a} | {b}", "{adj} {c} {a} {a2}",
                        "{b} {c}", "{c} for home, {a}", "{B} {C} {A}", "{c} ({a}) {s}"])
    out = t.format(b=b, c=core, a=attr(kind), a2=attr(kind), s=sku(), adj=rng.choice(ADJ),
                   B=b.upper(), C=core.title(), A=attr(kind).upper())
    if rng.random() < 0.05:  # typo noise
        j = rng.randrange(len(out))
        out = out[:j] + out[j + 1:]
    return " ".join(out.split())


# Long-tailed counts
order = list(range(NL))
rng.shuffle(order)
counts = {}
for k, i in enumerate(order):
    if k < 25:
        counts[i] = rng.randint(40, 60)
    elif k < 55:
        counts[i] = rng.choice([1, 1, 2])
    else:
        counts[i] = rng.randint(3, 11)

train = []
for i in range(NL):
    seen = set()
    while len([1 for t, l in train if l == LEAVES[i][0]]) < counts[i]:
        t = title(i)
        if t.lower() in seen:
            continue
        seen.add(t.lower())
        train.append((t, LEAVES[i][0]))
# cross-category near/exact duplicates (the same listing filed under two leaves)
dup_pairs = [("usb-c cable 1m black", "Electronics > Cables > USB-C", "Electronics > Chargers/Power Adapters"),
             ("XL 2-pack 500ml", "Kitchen", None), ("Acme t-shirt XL", "Clothing, Shoes & Accessories > Men's > T-Shirts",
                                                    "Clothing, Shoes & Accessories > Women's > T-Shirts"),
             ("iPhone 15 case black", "Electronics > Phones/Tablets > Cases/Covers > iPhone 15",
              "Electronics > Phones/Tablets > Cases/Covers > iPhone 15 Pro"),
             ("LED light 10m", "Home & Garden > Lights, Lamps > String/Fairy Lights",
              "Home & Garden > Lights, Lamps > Ceiling Lights"),
             ("dog toy rope", "Pet Supplies > Dogs > Toys", "Pet Supplies > Cats > Toys")]
paths = {p for p, *_ in LEAVES}
for t, a, b in dup_pairs:
    for p in (a, b):
        if p in paths:
            train.append((t, p))
# SKU-only lines in big categories
for _ in range(25):
    i = rng.choice(order[:25])
    train.append((f"{sku()} {rng.choice(PACKS)} {rng.choice(VOLS)}", LEAVES[i][0]))
rng.shuffle(train)

# Test: drawn like the training mix, only labels with >= 3 training rows... and a few tiny ones too
tr_titles = {t.lower() for t, _ in train}
test = []
weights = [counts[i] for i in range(NL)]
while len(test) < 500:
    i = rng.choices(range(NL), weights=weights)[0]
    t = title(i)
    if t.lower() in tr_titles:
        continue
    test.append((t, LEAVES[i][0]))

with open("catalog_train.csv", "w", newline="", encoding="utf-8") as f:
    w = csv.writer(f)
    w.writerow(["title", "category"])
    w.writerows(train)
with open("catalog_test.csv", "w", newline="", encoding="utf-8") as f:
    w = csv.writer(f)
    w.writerow(["title", "category"])
    w.writerows(test)

OFF = ["where is my refund", "asdf", "I want to cancel my order", "hello??", "what are your opening hours",
       "my package never arrived", "lorem ipsum dolor sit amet", "Can I speak to a human", "password reset not working",
       "1234567890", "!!!!", "qwertyuiop", "how do I change my delivery address", "the weather is nice today",
       "Stornierung bitte"]
unl = [title(rng.randrange(NL)) for _ in range(85)] + OFF
rng.shuffle(unl)
with open("unlabelled.txt", "w", encoding="utf-8") as f:
    f.write("\n".join(unl) + "\n")

# ---- mistake files -------------------------------------------------------------------------------------------
# (a) empty label cell on one row; (b) trailing-space variant of a label; (c) BOM + CRLF
rows = [("title", "category")] + train
with open("mistake_empty_label.csv", "w", newline="", encoding="utf-8") as f:
    w = csv.writer(f)
    r2 = list(rows)
    r2[57] = (r2[57][0], "")
    w.writerows(r2)
with open("mistake_trailing_space.csv", "w", newline="", encoding="utf-8") as f:
    w = csv.writer(f)
    r3 = list(rows)
    big = LEAVES[order[0]][0]
    n = 0
    for k, (t, l) in enumerate(r3):
        if l == big and n < 5:
            r3[k] = (t, l + " ")
            n += 1
    w.writerows(r3)
with open("mistake_bom_crlf.csv", "w", newline="", encoding="utf-8-sig") as f:
    w = csv.writer(f, lineterminator="\r\n")
    w.writerows(rows)

print(f"leaves={NL} train={len(train)} test={len(test)} unlabelled={len(unl)}")
import collections
c = collections.Counter(l for _, l in train)
print("per-label rows: max", max(c.values()), "labels with 1:", sum(v == 1 for v in c.values()),
      "with 2:", sum(v == 2 for v in c.values()), "3-11:", sum(3 <= v <= 11 for v in c.values()),
      ">=40:", sum(v >= 40 for v in c.values()))
tc = collections.Counter(l for _, l in test)
print("test labels:", len(tc), "test labels with <3 train rows:", sum(1 for l in tc if c[l] < 3))
