"""The words of the bank world: names, account nicknames, security questions and the
templates customers write with.

Kept apart from the world's logic so a new phrasing is a one-line change here and never moves
a rollout's state. Every template of one intent and disclosure carries the same facts.
"""

from __future__ import annotations

FIRST_NAMES: tuple[str, ...] = (
    "Amara", "Bruno", "Carla", "Dmitri", "Esther", "Felix", "Gita", "Hamza", "Isla", "Jun",
    "Kofi", "Lena", "Mateo", "Noor", "Oskar", "Paula", "Ravi", "Sofia", "Tomas", "Wen",
)  # fmt: skip
LAST_NAMES: tuple[str, ...] = (
    "Adeyemi", "Bauer", "Costa", "Dahl", "Evans", "Fontaine", "Gupta", "Horvat",
    "Ito", "Jovanovic", "Keller", "Lindqvist", "Mendes", "Novak", "Oliveira", "Quinn",
)  # fmt: skip

#: What a savings account is called by its owner: the name a customer asks for it by.
NICKNAMES: tuple[str, ...] = (
    "holiday fund", "rainy day", "new car", "house deposit", "wedding", "school fees",
)  # fmt: skip

#: Answers to the bank's one security question (the name of a first pet).
PET_NAMES: tuple[str, ...] = (
    "Biscuit", "Pepper", "Juniper", "Mochi", "Rufus", "Clementine", "Ziggy", "Waffles",
)  # fmt: skip

#: How a customer writes: an opener, a closer, and how many follow-ups they give.
MOODS: dict[str, tuple[tuple[str, ...], str]] = {
    "calm": (("Hello, ", "Hi there. ", "Good morning. "), " Thank you."),
    "worried": (("Please help, ", "I'm quite worried: ", "Urgent: "), " Please be quick."),
}
PATIENCE: dict[str, int] = {"calm": 3, "worried": 2}

#: The customer's first message, by intent and by what they disclose up front ("full": their
#: phone number and security answer; "withheld": neither, given only when asked).
TEMPLATES: dict[str, dict[str, tuple[str, ...]]] = {
    "transfer": {
        "full": (
            "please move {amount} from my checking to my {nickname} savings. My phone is "
            "{phone} and my first pet was {answer}.",
            "I'd like to transfer {amount} into the {nickname} account from checking. Phone "
            "{phone}, security answer {answer}.",
        ),
        "withheld": (
            "please move {amount} from my checking to my {nickname} savings.",
            "I'd like to transfer {amount} into the {nickname} account from checking.",
        ),
    },
    "balance": {
        "full": (
            "how much is in my {nickname} savings? My phone is {phone}; my first pet was {answer}.",
            "what's the balance of the {nickname} account? Phone {phone}, security answer "
            "{answer}.",
        ),
        "withheld": (
            "how much is in my {nickname} savings?",
            "what's the balance of the {nickname} account?",
        ),
    },
    "freeze_card": {
        "full": (
            "I lost my card ending {last4}, please freeze it. My phone is {phone} and my "
            "first pet was {answer}.",
            "freeze my card ending in {last4}, it's gone missing. Phone {phone}, security "
            "answer {answer}.",
        ),
        "withheld": (
            "I lost my card ending {last4}, please freeze it.",
            "freeze my card ending in {last4}, it's gone missing.",
        ),
    },
}
