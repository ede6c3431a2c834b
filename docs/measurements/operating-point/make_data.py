"""Synthetic moderation export: comments with a rare 'abusive' label (a helper's trial, README only).

    python make_data.py [K]   # K = 0 (default): the trial's own files; K > 0: another draw of both files

Writes:
  export_comments.csv      ~2,200 rows, ~4 % abusive, ~2 % mislabelled, exact + near duplicates
  next_week.csv            ~500 rows, different seed, ~6 % abusive, ~1 % mislabelled (audited gold sample)
  next_week_truth.csv      the generator's clean labels for next_week (for my own analysis only)
  out_of_scope.txt         non-English, code, empty-ish lines
"""
import csv
import random
from datetime import datetime, timedelta

USERS = ["@mike_r", "@jess", "@TheRealDan", "@sam_92", "@moderator", "@admin", "@kat.lee", "@bigfan", "@noodle",
         "@ref_watch", "@gamer4life", "@lina", "@OP"]
URLS = ["https://example.com/article/123", "http://bit.ly/3xYz", "https://youtu.be/dQw4w9", "www.shop-deals.net/sale",
        "https://news.site/politics/2024/vote", "https://imgur.com/a/Kp2"]
EMO_POS = ["😂", "👍", "🔥", "❤️", "🙌", "😍", "🎉", "😊", "💯"]
EMO_NEG = ["😡", "🤬", "🙄", "😤", "💀", "🤡", "👎", "😒"]
TOPICS = ["the new update", "this recipe", "the match last night", "the referee", "this article", "the patch notes",
          "the camera on this phone", "the election coverage", "the season finale", "this tutorial", "the delivery",
          "the new coach", "the city council vote", "the concert", "this video", "the trailer", "the customer service"]
THINGS = ["battery life", "plot", "defence", "soundtrack", "price", "pacing", "graphics", "ending", "sauce",
          "argument", "the second half", "the interview", "the editing", "the ranking", "the stats"]
ADJ_GOOD = ["great", "awesome", "solid", "underrated", "brilliant", "decent", "really helpful", "so good", "lovely"]
ADJ_BAD = ["terrible", "awful", "a total mess", "disappointing", "overrated", "garbage", "a joke", "broken", "lazy"]
FILLER = [
    "I've been following this for a while now and honestly it keeps getting better.",
    "My brother said the same thing last week and I didn't believe him.",
    "Not sure why people are so surprised, the signs were there from the start.",
    "Anyway, just my two cents, take it or leave it.",
    "The comments section on the other site was way worse than here.",
    "I had to watch it twice to really get what was going on.",
    "Shipping took forever but that's not really their fault I guess.",
    "We tried this at home with the kids and they loved it.",
    "Compared to last year this is a big step up in my opinion.",
    "If anyone has a link to the full version please share it.",
    "The first half was slow but it picked up after the break.",
    "People keep arguing about the numbers but nobody reads the source.",
    "I work in this industry and can confirm most of what the article says.",
    "Edit: fixed a typo, thanks to whoever pointed it out.",
    "Also, does anyone know if there will be a sequel or part two?",
    "Honestly the best part was the small details nobody talks about.",
    "I disagree with a few points but overall a fair take.",
    "This thread is getting long so I'll keep it short.",
]

# --- abusive vocabulary (non-graphic; slurs are placeholders) ---
INSULT_N = ["idiot", "moron", "clown", "loser", "waste of space", "pathetic troll", "absolute muppet", "degenerate",
            "brainless sheep", "parasite", "nobody", "lowlife", "[SLUR]", "[SLUR_2]", "disgusting [SLUR]"]
INSULT_ADJ = ["worthless", "pathetic", "braindead", "disgusting", "useless", "stupid", "vile", "subhuman"]
THREATS = [
    "I know where you live, watch your back",
    "keep talking and you'll regret it, I'll make sure of it",
    "someone should shut you up for good",
    "you better hope we never meet in person",
    "I'm going to find you and make you pay",
    "people like you deserve to get hurt",
    "say that again and see what happens to you",
    "I will ruin your life, mark my words",
    "count your days {u}",
    "I've got your address, see you soon",
]
HARASS = [
    "nobody wants you here, log off forever",
    "go crawl back under your rock",
    "everyone hates you, just disappear",
    "your family must be so ashamed of you",
    "get out of this country you [SLUR]",
    "all [SLUR_2] people are trash and should be banned",
    "shut your mouth, nobody asked you",
    "you're the reason this site is dying, get lost",
]


def pick(r, xs):
    return r.choice(xs)


def maybe_decorate(r, t, neg_mood=False):
    if r.random() < 0.25:
        t = pick(r, USERS) + " " + t
    if r.random() < 0.22:
        emo = EMO_NEG if neg_mood else (EMO_POS if r.random() < 0.7 else EMO_NEG)
        t = t + " " + "".join(r.choice(emo) for _ in range(r.randint(1, 3)))
    if r.random() < 0.08:
        t = t + " " + pick(r, URLS)
    if r.random() < 0.07:
        t = t.upper()
    if r.random() < 0.05:
        t = t.lower().replace(".", "")
    return t


def lengthen(r, t):
    u = r.random()
    if u < 0.55:
        return t
    n = r.randint(1, 3) if u < 0.85 else r.randint(4, 9)
    parts = [t] + [pick(r, FILLER) for _ in range(n)]
    if r.random() < 0.5:
        core = parts.pop(0)
        parts.insert(r.randint(0, len(parts)), core)
    return " ".join(parts)


def normal(r):
    f = [
        lambda: f"{pick(r, TOPICS).capitalize()} was {pick(r, ADJ_GOOD)}, loved the {pick(r, THINGS)}.",
        lambda: f"Honestly {pick(r, TOPICS)} is {pick(r, ADJ_BAD)}. The {pick(r, THINGS)} needs work.",
        lambda: f"Does anyone know when {pick(r, TOPICS)} comes out in Europe?",
        lambda: f"thanks for sharing!",
        lambda: f"First!",
        lambda: f"lol",
        lambda: f"Same here, the {pick(r, THINGS)} was {pick(r, ADJ_GOOD)}.",
        lambda: f"I think {pick(r, TOPICS)} deserves more attention, the {pick(r, THINGS)} alone is worth it.",
        lambda: f"Can confirm, {pick(r, THINGS)} is {pick(r, ADJ_BAD)} on my device too.",
        lambda: f"Great point {pick(r, USERS)}, hadn't thought of it that way.",
        lambda: f"Source? I'd like to read more about {pick(r, TOPICS)}.",
        lambda: f"Check this out: {pick(r, URLS)}",
        lambda: f"My kid watched {pick(r, TOPICS)} three times already haha",
        lambda: f"Not a fan of the {pick(r, THINGS)} but the rest was {pick(r, ADJ_GOOD)}.",
        lambda: f"Who else is here after {pick(r, TOPICS)}?",
        lambda: f"Ordered it on Monday, arrived Wednesday. {pick(r, ADJ_GOOD).capitalize()} service.",
        lambda: f"Rating: 7/10, {pick(r, THINGS)} {pick(r, ADJ_BAD)}, rest fine.",
        lambda: f"{pick(r, ADJ_GOOD).upper()}!!! {pick(r, EMO_POS)}",
        lambda: f"I respectfully disagree, {pick(r, TOPICS)} was {pick(r, ADJ_BAD)} and the {pick(r, THINGS)} proves it.",
        lambda: f"Happy birthday {pick(r, USERS)}! 🎂",
        lambda: f"Is it just me or is the {pick(r, THINGS)} different from the trailer?",
        lambda: f"Subscribed. Keep it up!",
        lambda: f"Thanks {pick(r, USERS)}, that fixed it for me.",
        lambda: f"This is why I stopped watching {pick(r, TOPICS)}.",
    ]
    return pick(r, f)()


def heated(r):  # hard negative: angry but not abusive
    f = [
        lambda: f"THIS IS ABSOLUTELY RIDICULOUS. {pick(r, TOPICS).upper()} IS {pick(r, ADJ_BAD).upper()}!!!",
        lambda: f"The referee should be fired, worst call I've seen in years. Disgraceful.",
        lambda: f"I am so angry about {pick(r, TOPICS)}, they ruined the {pick(r, THINGS)} completely.",
        lambda: f"What a stupid decision by the management. Who signs off on this garbage?",
        lambda: f"This policy is idiotic and the council should be ashamed of it.",
        lambda: f"Killed it!!! That {pick(r, THINGS)} was insane 🔥🔥",
        lambda: f"I could murder a pizza right now after watching {pick(r, TOPICS)} lol",
        lambda: f"Worst customer service ever. Never buying from them again. Absolute joke.",
        lambda: f"You're wrong about the {pick(r, THINGS)} and here's why: the numbers don't support it.",
        lambda: f"Stop spreading misinformation {pick(r, USERS)}, read the actual report first.",
        lambda: f"The devs are clowns for shipping {pick(r, TOPICS)} in this state. Fix it!",
        lambda: f"I'm sick and tired of these delays. Unacceptable.",
        lambda: f"That defence was criminal, they should all be benched 😤",
        lambda: f"Hate this update so much. Rolling back.",
    ]
    return pick(r, f)()


def quoted(r):  # hard negative: reporting / discussing abuse
    f = [
        lambda: f"Someone in the chat called me a [SLUR] and said \"I know where you live\". Reported to {pick(r, USERS)}.",
        lambda: f"Mods, {pick(r, USERS)} keeps sending me messages calling me a {pick(r, INSULT_N)}. Please look into it.",
        lambda: f"Calling people \"{pick(r, INSULT_ADJ)} {pick(r, INSULT_N)}\" is not debate, it's harassment. Please be kind.",
        lambda: f"Reminder: threats like \"{pick(r, THREATS).format(u='')}\" get you banned here. Report, don't reply.",
        lambda: f"Why was my comment removed? I only quoted the guy who wrote '{pick(r, HARASS)}'.",
        lambda: f"The article documents how players received messages like \"{pick(r, HARASS)}\" after the final.",
        lambda: f"Using the word [SLUR] is never okay, even as a joke. Glad they banned it.",
        lambda: f"I got called an {pick(r, ['idiot', 'moron', 'clown'])} for liking {pick(r, TOPICS)} 😂 the internet is wild",
    ]
    return pick(r, f)()


def sarcasm(r):  # hard negative
    f = [
        lambda: f"Oh great, another update that breaks everything. Genius move, devs. 🙄",
        lambda: f"Wow, what a surprise, {pick(r, TOPICS)} is late again. Shocking.",
        lambda: f"Sure, because {pick(r, THINGS)} totally matters more than the actual story. Brilliant.",
        lambda: f"Yeah I'm sure the 'experts' know best 🤡",
        lambda: f"Nice job breaking it, hero.",
        lambda: f"Love paying full price for a beta. Truly innovative.",
    ]
    return pick(r, f)()


def abusive(r):
    u = pick(r, USERS)
    f = [
        lambda: f"you are a {pick(r, INSULT_ADJ)} {pick(r, INSULT_N)}",
        lambda: f"{u} shut up you {pick(r, INSULT_ADJ)} {pick(r, INSULT_N)}",
        lambda: f"Only a {pick(r, INSULT_N)} would think {pick(r, TOPICS)} is good. You people are {pick(r, INSULT_ADJ)}.",
        lambda: pick(r, THREATS).format(u=u),
        lambda: f"{u} {pick(r, THREATS).format(u='')}.",
        lambda: pick(r, HARASS),
        lambda: f"{u} {pick(r, HARASS)}",
        lambda: f"YOU {pick(r, INSULT_ADJ).upper()} {pick(r, INSULT_N).upper()}, {pick(r, HARASS).upper()}",
        lambda: f"Typical {pick(r, ['[SLUR]', '[SLUR_2]', '[SLUR_3]'])} behaviour, you lot should be kicked off this site.",
        lambda: f"Imagine being this {pick(r, INSULT_ADJ)}. {pick(r, HARASS).capitalize()}.",
        lambda: f"The author of this article is a {pick(r, INSULT_N)} and {pick(r, THREATS).format(u='')}",
        lambda: f"ur so {pick(r, INSULT_ADJ)} lmao {pick(r, HARASS)}",
    ]
    return pick(r, f)()


def generate(n, pos_rate, seed, noise_rate, id_start):
    r = random.Random(seed)
    rows = []
    t0 = datetime(2024, 5, 6) + timedelta(days=7 * (seed % 5))
    for i in range(n):
        if r.random() < pos_rate:
            t = maybe_decorate(r, abusive(r), neg_mood=True)
            if r.random() < 0.3:
                t = lengthen(r, t)
            y, kind = "abusive", "abusive"
        else:
            u = r.random()
            if u < 0.72:
                t, kind = normal(r), "normal"
            elif u < 0.86:
                t, kind = heated(r), "heated"
            elif u < 0.94:
                t, kind = quoted(r), "quoted"
            else:
                t, kind = sarcasm(r), "sarcasm"
            t = lengthen(r, maybe_decorate(r, t, neg_mood=kind in ("heated", "sarcasm")))
            y = "ok"
        rows.append({"text": t, "y": y, "kind": kind})
    # duplicates: spammy exact copies and near copies (case / punctuation / trailing emoji)
    n_dup = int(0.04 * n)
    for _ in range(n_dup):
        src = r.choice(rows)
        t = src["text"]
        v = r.random()
        if v < 0.4:
            pass
        elif v < 0.6:
            t = t.lower()
        elif v < 0.8:
            t = t.rstrip(".!") + "!!"
        else:
            t = t + " " + r.choice(EMO_POS + EMO_NEG)
        rows.insert(r.randrange(len(rows)), {"text": t, "y": src["y"], "kind": src["kind"] + "-dup"})
    # label noise
    n_noise = int(round(noise_rate * len(rows)))
    pos_idx = [i for i, x in enumerate(rows) if x["y"] == "abusive"]
    hard_idx = [i for i, x in enumerate(rows) if x["kind"].split("-")[0] in ("heated", "quoted", "sarcasm")]
    neg_idx = [i for i, x in enumerate(rows) if x["y"] == "ok"]
    n_missed = max(1, int(0.5 * n_noise))
    flips = set(r.sample(pos_idx, min(n_missed, len(pos_idx))))
    n_over = n_noise - len(flips)
    flips |= set(r.sample(hard_idx, int(0.7 * n_over)))
    while len(flips) < n_noise:
        flips.add(r.choice(neg_idx))
    out = []
    for i, x in enumerate(rows):
        obs = x["y"]
        if i in flips:
            obs = "ok" if x["y"] == "abusive" else "abusive"
        ts = t0 + timedelta(seconds=r.randint(0, 7 * 86400))
        reported = 0
        if x["y"] == "abusive":
            reported = r.choice([0, 0, 1, 1, 2, 3, 5, 8])
        elif r.random() < 0.08:
            reported = r.choice([1, 1, 2])
        out.append({"comment_id": f"c{id_start + i:07d}", "created_at": ts.strftime("%Y-%m-%dT%H:%M:%SZ"),
                    "comment_text": x["text"], "reported_by_users": reported, "moderation_label": obs,
                    "_true": x["y"], "_kind": x["kind"], "_flipped": i in flips})
    return out


def write(rows, path, cols):
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=cols, quoting=csv.QUOTE_NONNUMERIC, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)


COLS = ["comment_id", "created_at", "comment_text", "reported_by_users", "moderation_label"]

if __name__ == "__main__":
    import sys

    k = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    train = generate(2150, 0.04, seed=11 + 100 * k, noise_rate=0.02, id_start=1_000_000)
    write(train, "export_comments.csv", COLS)
    nw = generate(480, 0.06, seed=22 + 100 * k, noise_rate=0.01, id_start=2_000_000)
    write(nw, "next_week.csv", COLS)
    write(nw, "next_week_truth.csv", COLS + ["_true", "_kind", "_flipped"])
    oos = [
        "Das ist wirklich ein schöner Artikel, danke fürs Teilen.",
        "¿Alguien sabe cuándo sale la próxima temporada?",
        "これは本当に面白いですね",
        "def foo(x):\n    return x * 2".replace("\n", " "),
        "SELECT * FROM users WHERE id = 42;",
        "for (int i = 0; i < n; i++) { sum += a[i]; }",
        "...",
        "👍",
        "asdfghjkl qwertyuiop",
        "1234567890",
        "Le match d'hier soir était incroyable, quel but !",
        "Ты вообще понимаешь, что пишешь?",
        "<div class=\"comment\">null</div>",
        "?",
        "  ",
    ]
    with open("out_of_scope.txt", "w", encoding="utf-8") as f:
        f.write("\n".join(oos) + "\n")
    import collections
    for name, rows in [("train", train), ("next_week", nw)]:
        c = collections.Counter(x["moderation_label"] for x in rows)
        print(name, len(rows), dict(c), "flipped", sum(x["_flipped"] for x in rows),
              "kinds", dict(collections.Counter(x["_kind"].split("-")[0] for x in rows)))
