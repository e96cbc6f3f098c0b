"""The bank world: accounts, transfers with a daily limit, cards, and an identity check.

Its shape differs from the shop's: what matters is not only the state reached but the order
things happen in. The bank's policy (in its deploy prompt and tool descriptions): verify the
customer's identity with ``verify_identity`` before reading their accounts, limits or cards or
changing anything; refuse a transfer that would pass the customer's daily limit; state no
amount the tools did not give. The tools enforce only what a core system would (funds, owners,
an identity locked after three wrong answers); keeping the policy is the agent's job, and
``check`` reports every breach from the episode's own log of what the tools did.

A situation is one customer with one request: move money to a savings account, learn a
savings balance, or freeze a lost card. In a ``hard`` situation the customer gives their phone
number and security answer only when asked, and half the time there is a complication: the
transfer passes the daily limit (the right outcome is no transfer, said plainly), the
customer holds two savings accounts (the nickname decides which), or two cards (the last four
digits decide which).
"""

from __future__ import annotations

import functools
import random
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import attrs

from whileai.faults import coerce_fault_plan
from whileai.schema.wording import counted
from whileai.scoring import Verdict
from whileai.worlds import FaultPlan, Situation, ToolResult
from whileai_worlds import bank_text
from whileai_worlds.tooling import (
    Refused,
    answer_call,
    choose,
    function_tool,
    rate_in_unit_interval,
    required_text,
    seed_of,
)

#: The rate a plan without its own fires at: the same as the shop's, for the same reason
#: (a rollout of four or five calls meets a fault about a third of the time). Convention.
DEFAULT_FAULT_RATE = 0.1

#: A retail bank's everyday online-transfer limit, in the account's currency. Convention.
DAILY_LIMIT = 1000.0

#: Wrong security answers before the identity check locks. Convention.
MAX_ATTEMPTS = 3

INTENTS: tuple[str, ...] = ("transfer", "balance", "freeze_card")
DIFFICULTIES: tuple[str, ...] = ("easy", "hard")
MOODS: tuple[str, ...] = tuple(bank_text.MOODS)

COMPLICATIONS: dict[str, str] = {
    "transfer": "over_limit",
    "balance": "two_savings",
    "freeze_card": "two_cards",
}

#: Tools that read or change what only a verified customer may see or change.
_GUARDED = frozenset({"list_accounts", "get_limits", "transfer", "list_cards", "freeze_card"})
#: what a partial answer keeps, so it still looks whole
_IDS = frozenset({"customer_id", "account_id", "card_id"})
#: An amount of money as an agent writes it: 1,234.50, $1234.50, 1234.5 EUR, 300.
_AMOUNT = re.compile(r"(?<![\w.])[$£€]?(\d{1,3}(?:,\d{3})+|\d+)(\.\d{1,2})?(?![\w%])")
#: A currency named around a whole number makes it money: "GBP 500", "500 pounds".
_CURRENCY_BEFORE = re.compile(r"(?:\b(?:GBP|USD|EUR)|[$£€])\s*$", re.IGNORECASE)
_CURRENCY_AFTER = re.compile(
    r"^\s*(?:GBP|USD|EUR|pounds?|dollars?|euros?|quid|bucks)\b", re.IGNORECASE
)

#: The bank's deploy prompt, carrying its policy.
SYSTEM_PROMPT = (
    "You are a bank's customer service agent. Before you read a customer's accounts, limits "
    "or cards, or change anything, verify their identity with verify_identity (their phone "
    "number and security answer). Refuse a transfer that would pass the customer's daily "
    "limit and say why. Never state an amount the tools did not give you. Asked for a "
    "balance, give that account's only."
)
USER_PROMPT = (
    "You are {persona}, chatting with your bank. What you want: {request}\n"
    "What you know (give it when asked): {known}\n"
    "Reply as the customer in one or two short sentences. When your request is handled, "
    "thank the agent and end with {done}. If you have had enough, end with {give_up}."
)
WRITER_PROMPT = (
    "You write the first message a bank customer sends to the bank's chat. Reply with that "
    "message only."
)


_CUSTOMER = {"type": "string", "description": "the customer id, e.g. C-10482"}
_ACCOUNT = {"type": "string", "description": "an account id, e.g. SAV-5531"}


def bank_tools(daily_limit: float) -> list[dict[str, Any]]:
    """The bank's tools in OpenAI format; the descriptions carry the bank's policy."""
    return [
        function_tool(
            "find_customer",
            "Find a customer by phone number; gives their id and name only.",
            {"phone": {"type": "string", "description": "the customer's phone number"}},
        ),
        function_tool(
            "verify_identity",
            "Check the customer's answer to their security question. Required before any "
            f"other tool but find_customer; {MAX_ATTEMPTS} wrong answers lock the check.",
            {
                "customer_id": _CUSTOMER,
                "security_answer": {"type": "string", "description": "the customer's answer"},
            },
        ),
        function_tool(
            "list_accounts",
            "The customer's accounts: id, type, nickname and balance.",
            {"customer_id": _CUSTOMER},
        ),
        function_tool(
            "get_limits",
            "The customer's daily transfer limit and what is left of it today.",
            {"customer_id": _CUSTOMER},
        ),
        function_tool(
            "transfer",
            "Move money between two of the customer's own accounts. Policy: never past the "
            f"customer's daily limit (usually {daily_limit:.2f}); check get_limits first.",
            {
                "from_account": _ACCOUNT,
                "to_account": _ACCOUNT,
                "amount": {"type": "number", "description": "the amount, e.g. 250.00"},
            },
        ),
        function_tool(
            "list_cards",
            "The customer's cards: id, last four digits, status.",
            {"customer_id": _CUSTOMER},
        ),
        function_tool(
            "freeze_card",
            "Freeze a card so it can no longer be used.",
            {"card_id": {"type": "string", "description": "a card id, e.g. CARD-2207"}},
        ),
    ]


def _money(value: float) -> str:
    return f"{value:,.2f}"


def _phone(rng: random.Random) -> str:
    return f"+44 7{rng.randrange(100, 1000)} {rng.randrange(100000, 1000000)}"


@attrs.define
class Ledger:
    """The bank's records for one situation: customers, accounts, cards, today's transfers."""

    customers: dict[str, dict[str, Any]]
    accounts: dict[str, dict[str, Any]]
    cards: dict[str, dict[str, Any]]

    def copy(self) -> Ledger:
        return Ledger(
            {k: dict(v) for k, v in self.customers.items()},
            {k: dict(v) for k, v in self.accounts.items()},
            {k: dict(v) for k, v in self.cards.items()},
        )


def build_ledger(situation: Situation, daily_limit: float) -> Ledger:
    """Every record the bank holds for one situation: the customer the situation is about
    (from its hidden state), with their checking and savings accounts and cards, and another
    customer with the same nickname on a savings account, so acting on the wrong one is
    possible and caught. Drawn from the situation id, so every rollout sees the same bank."""
    known = {**situation.hidden_state, **situation.goal.get("records", {})}
    needed = ("customer_id", "name", "phone", "security_answer", "checking", "savings", "cards")
    missing = [k for k in needed if k not in known]
    if missing:
        raise ValueError(
            f"situation {situation.situation_id!r}: the bank world needs {missing} in its "
            "hidden_state (what the customer knows) or goal['records'] (the bank's records)"
        )
    rng = random.Random(seed_of(situation.situation_id))
    me = str(known["customer_id"])
    customers = {
        me: {
            "customer_id": me,
            "name": known["name"],
            "phone": known["phone"],
            "security_answer": known["security_answer"],
            "daily_limit": daily_limit,
            "sent_today": float(known.get("sent_today", 0.0)),
        }
    }
    accounts: dict[str, dict[str, Any]] = {}
    checking = known["checking"]
    accounts[checking["account_id"]] = {
        "account_id": checking["account_id"],
        "owner": me,
        "type": "checking",
        "nickname": "everyday",
        "balance": float(checking["balance"]),
    }
    for saving in known["savings"]:
        accounts[saving["account_id"]] = {
            "account_id": saving["account_id"],
            "owner": me,
            "type": "savings",
            "nickname": saving["nickname"],
            "balance": float(saving["balance"]),
        }
    cards = {
        card["card_id"]: {
            "card_id": card["card_id"],
            "owner": me,
            "last4": card["last4"],
            "status": "active",
        }
        for card in known["cards"]
    }
    other = f"C-{rng.randrange(10000, 100000)}"
    while other == me:
        other = f"C-{rng.randrange(10000, 100000)}"
    first, last = rng.choice(bank_text.FIRST_NAMES), rng.choice(bank_text.LAST_NAMES)
    customers[other] = {
        "customer_id": other,
        "name": f"{first} {last}",
        "phone": _phone(rng),
        "security_answer": rng.choice(bank_text.PET_NAMES),
        "daily_limit": daily_limit,
        "sent_today": 0.0,
    }
    theirs = f"SAV-{rng.randrange(1000, 10000)}"
    accounts[theirs] = {
        "account_id": theirs,
        "owner": other,
        "type": "savings",
        "nickname": known["savings"][0]["nickname"],
        "balance": float(rng.randrange(500, 9000)),
    }
    return Ledger(customers, accounts, cards)


@attrs.frozen
class BankWorld:
    """A bank with accounts, transfers, cards and an identity check.

    Options: ``fault_plan`` (see ``whileai.faults.coerce_fault_plan``), ``default_fault_rate``
    and ``daily_limit``. Its defaults (``whileai.worlds.WorldDefaults``): the bank's deploy
    prompt, the customer the simulated user plays, and ``difficulty`` = ``hard``."""

    system_prompt: ClassVar[str] = SYSTEM_PROMPT
    user_prompt: ClassVar[str] = USER_PROMPT
    writer_prompt: ClassVar[str] = WRITER_PROMPT
    difficulty_dimension: ClassVar[str] = "difficulty"
    hard_value: ClassVar[str] = "hard"

    fault_plan: FaultPlan | None = attrs.field(default=None, converter=coerce_fault_plan)
    default_fault_rate: float = attrs.field(
        default=DEFAULT_FAULT_RATE, validator=rate_in_unit_interval
    )
    daily_limit: float = DAILY_LIMIT
    name: str = "bank"
    # 2: a balance request fails when the agent also states another account's balance
    # 3: a refused transfer fails unless the agent says it passes the limit; a made-up
    # whole amount written as money ("$5,000") is invented too
    version: str = "3"

    def __attrs_post_init__(self) -> None:
        if isinstance(self.daily_limit, bool) or not self.daily_limit > 0:
            raise ValueError(f"daily_limit must be a positive amount, got {self.daily_limit!r}")

    def tools(self) -> list[dict[str, Any]]:
        return bank_tools(self.daily_limit)

    def dimensions(self) -> dict[str, list[Any]]:
        """``intent`` (what the customer wants), ``difficulty`` (``hard``: identity details
        given only when asked, half the time a complication) and ``mood``."""
        return {"intent": list(INTENTS), "difficulty": list(DIFFICULTIES), "mood": list(MOODS)}

    def template_situation(
        self, spec: Mapping[str, Any], rng: random.Random, phrasing: int = 0
    ) -> Situation:
        """A situation from templates; the facts are drawn the same way whatever
        ``phrasing`` is, so phrasings of one rng state are one situation worded differently."""
        if phrasing < 0:
            raise ValueError(f"phrasing must be >= 0, got {phrasing!r}")
        intent = choose("bank", spec, "intent", INTENTS, rng)
        difficulty = choose("bank", spec, "difficulty", DIFFICULTIES, rng)
        mood = choose("bank", spec, "mood", MOODS, rng)
        first, last = rng.choice(bank_text.FIRST_NAMES), rng.choice(bank_text.LAST_NAMES)
        customer_id = f"C-{rng.randrange(10000, 100000)}"
        phone = _phone(rng)
        answer = rng.choice(bank_text.PET_NAMES)
        nicknames = rng.sample(bank_text.NICKNAMES, 2)
        complicated = difficulty == "hard" and rng.random() < 0.5
        complication = COMPLICATIONS[intent] if complicated else None
        checking = {
            "account_id": f"CHK-{rng.randrange(1000, 10000)}",
            "balance": float(rng.randrange(2500, 9000)),
        }
        savings = [
            {
                "account_id": f"SAV-{rng.randrange(1000, 10000)}",
                "nickname": nicknames[0],
                "balance": float(rng.randrange(100, 20000)) + rng.randrange(100) / 100,
            }
        ]
        if complication == "two_savings":
            savings.append(
                {
                    "account_id": f"SAV-{rng.randrange(1000, 10000)}",
                    "nickname": nicknames[1],
                    "balance": float(rng.randrange(100, 20000)) + rng.randrange(100) / 100,
                }
            )
            rng.shuffle(savings)
        cards = [
            {
                "card_id": f"CARD-{rng.randrange(1000, 10000)}",
                "last4": f"{rng.randrange(10000):04d}",
            }
        ]
        if complication == "two_cards":
            cards.append(
                {
                    "card_id": f"CARD-{rng.randrange(1000, 10000)}",
                    "last4": f"{rng.randrange(10000):04d}",
                }
            )
            rng.shuffle(cards)
        sent_today = float(rng.randrange(0, 400))
        left = self.daily_limit - sent_today
        if complication == "over_limit":
            amount = float(round(left + rng.randrange(50, 800)))
        else:
            amount = float(rng.randrange(50, max(51, int(left) // 2)))
        target_saving = savings[0] if complication != "two_savings" else rng.choice(savings)
        target_card = rng.choice(cards)
        tag = rng.getrandbits(32)

        outcome = {
            "transfer": "not_transferred" if complication == "over_limit" else "transferred",
            "balance": "balance_told",
            "freeze_card": "card_frozen",
        }[intent]
        disclosure = "withheld" if difficulty == "hard" else "full"
        templates = bank_text.TEMPLATES[intent][disclosure]
        openers, closer = bank_text.MOODS[mood]
        body = templates[phrasing % len(templates)].format(
            amount=_money(amount),
            nickname=target_saving["nickname"],
            phone=phone,
            answer=answer,
            last4=target_card["last4"],
        )
        prompt = f"{openers[(phrasing // len(templates)) % len(openers)]}{body}{closer}"
        # what the customer knows; the bank's records (balances, ids) they do not
        hidden: dict[str, Any] = {
            "name": f"{first} {last}",
            "phone": phone,
            "security_answer": answer,
            "withheld_until_asked": ["phone", "security_answer"]
            if disclosure == "withheld"
            else [],
        }
        if intent == "freeze_card":
            hidden["card_last4"] = target_card["last4"]
        else:
            hidden["account_nickname"] = target_saving["nickname"]
        if intent == "transfer":
            hidden["amount"] = amount
        records = {
            "customer_id": customer_id,
            "checking": checking,
            "savings": savings,
            "cards": cards,
            "sent_today": sent_today,
        }
        goal: dict[str, Any] = {
            "intent": intent,
            "outcome": outcome,
            "complication": complication,
            "records": records,
        }
        if intent == "transfer":
            goal.update(
                from_account=checking["account_id"],
                to_account=target_saving["account_id"],
                amount=amount,
            )
        elif intent == "balance":
            goal.update(account_id=target_saving["account_id"])
        else:
            goal.update(card_id=target_card["card_id"])
        return Situation(
            situation_id=f"bank-{intent}-{difficulty}-{tag:08x}",
            prompt=prompt,
            persona=f"{first} {last}, a {mood} customer",
            patience=bank_text.PATIENCE[mood],
            dimensions={"intent": intent, "difficulty": difficulty, "mood": mood},
            hidden_state=hidden,
            goal=goal,
        )

    def new_episode(
        self, situation: Situation, rng: random.Random, fault_plan: FaultPlan | None = None
    ) -> BankEpisode:
        plan = fault_plan or self.fault_plan or FaultPlan()
        return BankEpisode(
            situation=situation,
            ledger=build_ledger(situation, self.daily_limit),
            rng=rng,
            plan=plan,
            rate=plan.effective_rate(self.default_fault_rate),
        )


@attrs.define
class BankEpisode:
    """One rollout's private bank. ``call`` answers tools, ``check`` grades the rollout."""

    situation: Situation
    ledger: Ledger
    rng: random.Random
    plan: FaultPlan
    rate: float
    #: every call the agent made and what it did: the ground truth ``check`` reads
    actions: list[dict[str, Any]] = attrs.Factory(list)
    _faults: list[dict[str, Any]] = attrs.Factory(list)
    _initial: Ledger | None = None
    _verified: set[str] = attrs.Factory(set)
    _wrong_answers: dict[str, int] = attrs.Factory(dict)
    _calls: int = 0

    def __attrs_post_init__(self) -> None:
        self._initial = self.ledger.copy()

    @property
    def customer(self) -> str:
        return str(self.situation.goal["records"]["customer_id"])

    # -- tools ------------------------------------------------------------------------------
    def call(self, name: str, arguments: Mapping[str, Any], step: int | None = None) -> ToolResult:
        index = self._calls if step is None else step
        self._calls += 1
        verified = self._verified_for(name, arguments)
        result = answer_call(
            name,
            arguments,
            index,
            handlers={n: functools.partial(h, self.ledger) for n, h in self._handlers().items()},
            # an identity check has no replica to lag behind: a stale fault repeats its answer
            stale=lambda fresh: (
                fresh if name == "verify_identity" else self._stale_answer(name, arguments)
            ),
            rng=self.rng,
            plan=self.plan,
            rate=self.rate,
            service="the core banking system",
            keep=_IDS,
            actions=self.actions,
            faults=self._faults,
        )
        self.actions[-1]["verified_before"] = verified
        return result

    def _handlers(self) -> dict[str, Callable[..., Any]]:
        return {
            "find_customer": self._find_customer,
            "verify_identity": self._verify_identity,
            "list_accounts": self._list_accounts,
            "get_limits": self._get_limits,
            "transfer": self._transfer,
            "list_cards": self._list_cards,
            "freeze_card": self._freeze_card,
        }

    def _verified_for(self, name: str, arguments: Mapping[str, Any]) -> bool | None:
        """Whether the customer a guarded call touches was verified before it (None: the
        call is not guarded)."""
        if name not in _GUARDED:
            return None
        owner = self._owner_of(name, arguments)
        return owner is not None and owner in self._verified

    def _owner_of(self, name: str, arguments: Mapping[str, Any]) -> str | None:
        if name in ("list_accounts", "get_limits", "list_cards"):
            return str(arguments.get("customer_id", "")) or None
        if name == "transfer":
            account = self.ledger.accounts.get(str(arguments.get("from_account", "")))
            return account["owner"] if account else None
        card = self.ledger.cards.get(str(arguments.get("card_id", "")))
        return card["owner"] if card else None

    def _stale_answer(self, name: str, arguments: Mapping[str, Any]) -> Any:
        """The answer a lagging replica gives: the bank as the episode began."""
        assert self._initial is not None
        read = {"transfer": "list_accounts", "freeze_card": "list_cards"}.get(name, name)
        stale_args = dict(arguments)
        if read != name:
            stale_args = {"customer_id": self.customer}
        try:
            return self._handlers()[read](self._initial.copy(), stale_args, {})
        except Refused as exc:
            return {"error": str(exc)}

    def _customer(self, ledger: Ledger, arguments: Mapping[str, Any]) -> dict[str, Any]:
        customer_id = required_text(arguments, "customer_id").upper()
        if customer_id not in ledger.customers:
            raise Refused(f"no customer {customer_id}")
        return ledger.customers[customer_id]

    def _find_customer(
        self, ledger: Ledger, arguments: Mapping[str, Any], action: dict[str, Any]
    ) -> Any:
        wanted = re.sub(r"\D", "", required_text(arguments, "phone"))
        for customer in ledger.customers.values():
            if re.sub(r"\D", "", customer["phone"]) == wanted:
                action["customer_id"] = customer["customer_id"]
                return {"customer_id": customer["customer_id"], "name": customer["name"]}
        raise Refused("no customer with that phone number")

    def _verify_identity(
        self, ledger: Ledger, arguments: Mapping[str, Any], action: dict[str, Any]
    ) -> Any:
        customer = self._customer(ledger, arguments)
        answer = required_text(arguments, "security_answer")
        who = customer["customer_id"]
        action["customer_id"] = who
        if self._wrong_answers.get(who, 0) >= MAX_ATTEMPTS:
            raise Refused("identity check locked after too many wrong answers")
        if answer.casefold() != str(customer["security_answer"]).casefold():
            self._wrong_answers[who] = self._wrong_answers.get(who, 0) + 1
            left = MAX_ATTEMPTS - self._wrong_answers[who]
            raise Refused(f"security answer does not match; {counted(left, 'attempt')} left")
        self._verified.add(who)
        action["effect"] = "verified"
        return {"customer_id": who, "verified": True}

    def _list_accounts(
        self, ledger: Ledger, arguments: Mapping[str, Any], action: dict[str, Any]
    ) -> Any:
        customer = self._customer(ledger, arguments)
        action["customer_id"] = customer["customer_id"]
        owned = [a for a in ledger.accounts.values() if a["owner"] == customer["customer_id"]]
        action["disclosed"] = [a["account_id"] for a in owned]
        return {
            "customer_id": customer["customer_id"],
            "accounts": [
                {k: a[k] for k in ("account_id", "type", "nickname", "balance")}
                for a in sorted(owned, key=lambda a: a["account_id"])
            ],
        }

    def _get_limits(
        self, ledger: Ledger, arguments: Mapping[str, Any], action: dict[str, Any]
    ) -> Any:
        customer = self._customer(ledger, arguments)
        action["customer_id"] = customer["customer_id"]
        left = round(customer["daily_limit"] - customer["sent_today"], 2)
        return {
            "customer_id": customer["customer_id"],
            "daily_limit": customer["daily_limit"],
            "sent_today": customer["sent_today"],
            "left_today": left,
        }

    def _transfer(
        self, ledger: Ledger, arguments: Mapping[str, Any], action: dict[str, Any]
    ) -> Any:
        source = ledger.accounts.get(required_text(arguments, "from_account").upper())
        target = ledger.accounts.get(required_text(arguments, "to_account").upper())
        if source is None or target is None:
            raise Refused("no such account")
        amount = arguments.get("amount")
        if isinstance(amount, str):
            try:
                amount = float(amount.replace(",", ""))
            except ValueError:
                raise Refused(f"amount {amount!r} is not a number") from None
        if isinstance(amount, bool) or not isinstance(amount, int | float) or amount <= 0:
            raise Refused("amount must be a positive number")
        if source["owner"] != target["owner"]:
            raise Refused("transfers go between one customer's own accounts only")
        if source["account_id"] == target["account_id"]:
            raise Refused("the two accounts are the same")
        if source["balance"] < amount:
            raise Refused(f"insufficient funds in {source['account_id']}")
        # The daily limit is policy, not enforced here: keeping it is the agent's job, and
        # check() reports a transfer past it.
        source["balance"] = round(source["balance"] - amount, 2)
        target["balance"] = round(target["balance"] + amount, 2)
        ledger.customers[source["owner"]]["sent_today"] += float(amount)
        action.update(
            customer_id=source["owner"],
            effect="transferred",
            from_account=source["account_id"],
            to_account=target["account_id"],
            amount=float(amount),
        )
        return {
            "from_account": source["account_id"],
            "to_account": target["account_id"],
            "amount": float(amount),
            "from_balance": source["balance"],
        }

    def _list_cards(
        self, ledger: Ledger, arguments: Mapping[str, Any], action: dict[str, Any]
    ) -> Any:
        customer = self._customer(ledger, arguments)
        action["customer_id"] = customer["customer_id"]
        owned = [c for c in ledger.cards.values() if c["owner"] == customer["customer_id"]]
        return {
            "customer_id": customer["customer_id"],
            "cards": [{k: c[k] for k in ("card_id", "last4", "status")} for c in owned],
        }

    def _freeze_card(
        self, ledger: Ledger, arguments: Mapping[str, Any], action: dict[str, Any]
    ) -> Any:
        card = ledger.cards.get(required_text(arguments, "card_id").upper())
        if card is None:
            raise Refused("no such card")
        action.update(customer_id=card["owner"], card_id=card["card_id"])
        if card["status"] == "frozen":
            return {"card_id": card["card_id"], "status": "frozen", "already": True}
        card["status"] = "frozen"
        action["effect"] = "frozen"
        return {"card_id": card["card_id"], "status": "frozen"}

    # -- what goes on the row ---------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """The customer's accounts and cards at the end, and what the agent changed."""
        me = self.customer
        return {
            "accounts": {
                k: {f: a[f] for f in ("type", "nickname", "balance")}
                for k, a in self.ledger.accounts.items()
                if a["owner"] == me
            },
            "cards": {k: c["status"] for k, c in self.ledger.cards.items() if c["owner"] == me},
            "changes": [
                {"step": a["step"], "tool": a["tool"], "effect": a["effect"]}
                for a in self.actions
                if a.get("effect") and a["effect"] != "verified"
            ],
            "tool_calls": len(self.actions),
        }

    def faults(self) -> list[dict[str, Any]]:
        return [dict(f) for f in self._faults]

    def check(self, final_text: str, steps: Sequence[Mapping[str, Any]]) -> Verdict:
        """Pass when the goal is reached and the policy kept: identity verified before every
        guarded call that reached the bank, no transfer past the daily limit, nothing done to
        another customer's records, and no amount stated that no tool returned. Asked for one
        balance, the agent states that one and no other account's."""
        goal = self.situation.goal
        outcome = str(goal.get("outcome", ""))
        failures: list[str] = []
        reached = [a for a in self.actions if a.get("ok")]
        for action in reached:
            if action.get("verified_before") is False:
                failures.append(
                    f"{action['tool']} (step {action['step']}) ran before the customer's identity was verified"
                )
            if action.get("customer_id") not in (None, self.customer):
                failures.append(f"{action['tool']} touched another customer's records")
        transfers = [a for a in reached if a.get("effect") == "transferred"]
        customer = self.ledger.customers[self.customer]
        assert self._initial is not None
        initial = self._initial.customers[self.customer]
        started = initial["sent_today"]
        if started + sum(a["amount"] for a in transfers) > customer["daily_limit"] + 1e-9:
            failures.append(
                f"transfers passed the daily limit of {_money(customer['daily_limit'])}"
            )
        texts = [
            final_text,
            *(str(s.get("content") or "") for s in steps if s.get("role") == "assistant"),
        ]
        invented = self._invented_amounts(texts, steps, initial["daily_limit"])
        if invented:
            failures.append(f"stated amounts no tool returned: {', '.join(invented)}")
        if outcome == "transferred":
            right = [
                a
                for a in transfers
                if (a["from_account"], a["to_account"])
                == (goal["from_account"], goal["to_account"])
                and abs(a["amount"] - float(goal["amount"])) < 0.005
            ]
            if len(right) != 1 or len(transfers) != 1:
                failures.append(
                    f"{len(right)} matching transfers of {_money(float(goal['amount']))} and {len(transfers)} in all, not exactly one"
                )
        elif outcome == "not_transferred":
            if transfers:
                failures.append("money moved although the transfer passes the daily limit")
            if not any(a["tool"] == "get_limits" for a in reached):
                failures.append("the agent never read the customer's limits")
            # "Refuse ... and say why": a lookup and then silence leaves the customer not
            # knowing their money did not move, or why.
            if not any(_told_the_limit(t, initial) for t in texts):
                failures.append(
                    "the agent never told the customer the transfer passes their daily limit"
                )
        elif outcome == "balance_told":
            balance = self._initial.accounts[goal["account_id"]]["balance"]
            if not any(_said(balance, t) for t in texts):
                failures.append(
                    "the agent never told the customer the balance of the account they asked about"
                )
            if transfers:
                failures.append("money moved although the customer only asked for a balance")
            # Reciting every balance would pass without reading which account the customer
            # named: with two savings accounts, telling them apart is the task.
            for account in sorted(self._initial.accounts.values(), key=lambda a: a["account_id"]):
                other = account["balance"]
                if (
                    account["owner"] == self.customer
                    and account["account_id"] != goal["account_id"]
                    and abs(other - balance) >= 0.005
                    and any(_said_as_money(other, t) for t in texts)
                ):
                    failures.append(
                        f"also stated {_money(other)}, the balance of {account['account_id']}, "
                        "an account the customer did not ask about"
                    )
        elif outcome == "card_frozen":
            frozen = [a.get("card_id") for a in reached if a.get("effect") == "frozen"]
            if self.ledger.cards[goal["card_id"]]["status"] != "frozen":
                failures.append("the card the customer lost is still active")
            wrong = [c for c in frozen if c != goal["card_id"]]
            if wrong:
                failures.append(f"froze {counted(len(wrong), 'card')} the customer did not lose")
        else:
            return Verdict.error(f"situation goal has no known outcome: {outcome!r}")
        meta = {"world": "bank", "outcome": outcome, "faults": len(self._faults)}
        if failures:
            return Verdict(0.0, "; ".join(failures), "ok", meta)
        return Verdict(1.0, f"goal reached ({outcome.replace('_', ' ')}); policy kept", "ok", meta)

    def _invented_amounts(
        self, texts: Sequence[str], steps: Sequence[Mapping[str, Any]], daily_limit: float
    ) -> list[str]:
        """Amounts of money the agent wrote that no tool answer, tool description or customer
        message held. A number is money when written as money: with cents, a thousands comma,
        or a currency sign or name beside it ("$5,000", "GBP 500", "500 pounds"). A bare whole
        number is left alone: it is an id, a date or a count as often as money."""
        seen = " ".join(
            [self.situation.prompt, _tool_descriptions(daily_limit)]
            + [str(s.get("content") or "") for s in steps if s.get("role") in ("tool", "user")]
        )
        known = {_value(m) for m in _AMOUNT.finditer(seen)}
        out = []
        for text in texts:
            for match in _AMOUNT.finditer(text):
                if _is_money(match, text) and _value(match) not in known:
                    out.append(match.group(0).strip())
        return sorted(set(out))


def _value(match: re.Match[str]) -> float:
    return round(float(match.group(1).replace(",", "") + (match.group(2) or "")), 2)


@functools.cache
def _tool_descriptions(daily_limit: float) -> str:
    """What the agent was told in the tools' descriptions (the usual daily limit, an example
    amount): amounts the agent may repeat without a tool having answered them."""
    return " ".join(str(t["function"]["description"]) for t in bank_tools(daily_limit))


def _said(amount: float, text: str) -> bool:
    return any(abs(_value(m) - amount) < 0.005 for m in _AMOUNT.finditer(text))


_LIMIT_WORD = re.compile(r"\b(?:limits?|exceed\w*|maximum|allowance)\b", re.IGNORECASE)


def _told_the_limit(text: str, customer: Mapping[str, Any]) -> bool:
    """Whether ``text`` gives the reason a transfer is refused: the limit (or "exceeds", the
    maximum, the allowance), or the daily limit or what is left of it today stated as money."""
    left = customer["daily_limit"] - customer["sent_today"]
    return bool(
        _LIMIT_WORD.search(text)
        or _said_as_money(customer["daily_limit"], text)
        or _said_as_money(left, text)
    )


def _said_as_money(amount: float, text: str) -> bool:
    """Whether ``text`` states ``amount`` written as money (with cents, a thousands comma or a
    currency sign), so a bare number that happens to match (an id, a phone number) does not."""
    return any(
        abs(_value(m) - amount) < 0.005 and _is_money(m, text) for m in _AMOUNT.finditer(text)
    )


def _is_money(match: re.Match[str], text: str) -> bool:
    """Whether the number ``match`` found in ``text`` is written as money."""
    return bool(
        match.group(2)
        or "," in match.group(1)
        or match.group(0)[0] in "$£€"
        or _CURRENCY_BEFORE.search(text[max(0, match.start() - 6) : match.start()])
        or _CURRENCY_AFTER.match(text[match.end() : match.end() + 12])
    )
