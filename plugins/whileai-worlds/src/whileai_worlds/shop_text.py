"""The words of the shop world: catalogue, names, and the templates users write with.

Kept apart from the world's logic so a new phrasing is a one-line change here and never moves
a rollout's state. Every template of one intent and disclosure carries the same facts.
"""

from __future__ import annotations

ITEMS: tuple[tuple[str, float], ...] = (
    ("ceramic teapot", 39.0),
    ("desk lamp", 54.5),
    ("wireless headphones", 129.0),
    ("yoga mat", 32.0),
    ("coffee grinder", 89.9),
    ("hiking backpack", 110.0),
    ("phone case", 19.99),
    ("wool scarf", 45.0),
    ("bamboo cutting board", 27.5),
    ("bluetooth speaker", 74.0),
    ("steel water bottle", 24.0),
    ("picture frame", 16.5),
)

PROBLEMS: tuple[str, ...] = (
    "arrived cracked",
    "stopped working after two days",
    "arrived with a part missing",
    "came broken in the box",
)

FIRST_NAMES: tuple[str, ...] = (
    "Ana", "Ben", "Chloe", "Dev", "Elif", "Farid", "Grace", "Hiro", "Ines", "Jonas",
    "Kemi", "Luca", "Maya", "Nils", "Omar", "Priya", "Rosa", "Sven", "Tara", "Yusuf",
)  # fmt: skip
LAST_NAMES: tuple[str, ...] = (
    "Alvarez", "Brooks", "Chen", "Dubois", "Eriksen", "Fischer", "Garcia", "Haddad",
    "Ivanova", "Jensen", "Kowalski", "Lopez", "Moreau", "Nakamura", "Okafor", "Patel",
)  # fmt: skip
STREETS: tuple[str, ...] = (
    "Elm Street", "Harbour Road", "Mill Lane", "Station Avenue", "Park Row", "Quay Street",
)  # fmt: skip
CITIES: tuple[str, ...] = ("Leeds", "Porto", "Ghent", "Aarhus", "Lyon", "Graz")

#: The user's first message, by intent and by what the user discloses up front
#: ("full": order id and email; "withheld": only the item, the rest when asked).
TEMPLATES: dict[str, dict[str, tuple[str, ...]]] = {
    "refund": {
        "full": (
            "My order {order_id} ({item}) {problem}. I'd like a refund. My email is {email}.",
            "I want to return the {item} from order {order_id}; it {problem}. "
            "Account email: {email}. Can you refund it?",
            "Order {order_id}: the {item} {problem}. Please refund me ({email}).",
        ),
        "withheld": (
            "The {item} I ordered {problem}. I want my money back.",
            "I bought a {item} from you and it {problem}. Can I get a refund?",
            "Refund request: my {item} {problem}.",
        ),
    },
    "track": {
        "full": (
            "Where is my order {order_id}? My email is {email}.",
            "Can you give me the tracking number for order {order_id}? "
            "Email on the account: {email}.",
            "I'm waiting on order {order_id} ({item}). What's its status? I'm {email}.",
        ),
        "withheld": (
            "Where is my {item}? I ordered it a few days ago.",
            "I'm still waiting for the {item} I ordered. Can you track it?",
            "Has my {item} shipped yet? I need the tracking number.",
        ),
    },
    "address_change": {
        "full": (
            "Please change the delivery address of order {order_id} to {address}. "
            "My email is {email}.",
            "I moved. Order {order_id} should go to {address} instead. Account: {email}.",
            "Can you update the shipping address on {order_id}? New address: {address} ({email}).",
        ),
        "withheld": (
            "I need to change where my {item} is being delivered. I've moved.",
            "The {item} I just ordered is going to my old address. Can you fix that?",
            "Please update the delivery address for my {item} order.",
        ),
    },
}

#: How each tone opens and closes a message; a phrasing index past the templates picks the
#: next opener, so phrasings stay distinct well beyond three.
TONES: dict[str, tuple[tuple[str, ...], str]] = {
    "polite": (("Hello! ", "Hi there, ", "Good morning. "), " Thank you so much."),
    "curt": (("", "Hi. ", "Quick one: "), ""),
    "angry": (
        ("This is unacceptable. ", "I am really annoyed. ", "Second time I'm writing. "),
        " Sort it out now.",
    ),
}

#: How many follow-up turns each tone gives the agent before giving up.
PATIENCE: dict[str, int] = {"polite": 4, "curt": 3, "angry": 2}
