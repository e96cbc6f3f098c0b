"""The shop world: orders, refunds and accounts, one private copy per rollout.

A situation is one customer with one order in mind (the target). The customer knows the order
(id, item, email) and the agent must discover it; in a ``hard`` situation the user withholds
the order id and email up front, and half the time there is a complication the agent must
notice (the order is past the refund window, has already shipped, or a second order is in
transit). The shop also holds the customer's other orders and other customers' orders, so
acting on the wrong one is possible and caught.

``Episode.check`` grades what happened from the episode's own log of what the tools did (not
from the transcript, which faults and phrasing make unreliable): the goal state reached and
every constraint kept, with the reason naming what went wrong. The agent's replies are read
only for what it had to tell the customer (a tracking number, a refusal's reason) and what it
must not (another order's tracking number).

Policy the agent is told through the tool descriptions: refunds only for delivered orders and
only within ``refund_window_days`` of delivery; addresses only change before shipping.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import random
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import attrs

from whileai.faults import BLOCKING_KINDS, coerce_fault_plan
from whileai.schema.jsonline import key_text
from whileai.scoring import Verdict
from whileai.worlds import FaultPlan, Situation, ToolResult
from whileai_worlds import shop_text
from whileai_worlds.tooling import (
    Refused,
    answer_call,
    choose,
    function_tool,
    rate_in_unit_interval,
    required_text,
    seed_of,
)

#: The shop's "today": fixed, so a situation's dates (and the refund window) never depend on
#: when a run happens.
TODAY = dt.date(2026, 3, 2)

#: The rate a fault plan with no rate of its own fires at. At 0.1 a rollout of about four tool
#: calls meets at least one fault a third of the time (1 - 0.9**4), so a run measures both the
#: clean task and recovery from faults without one drowning the other. Convention, untested.
DEFAULT_FAULT_RATE = 0.1

#: Days after delivery a refund is allowed: a common retail return window. Convention.
REFUND_WINDOW_DAYS = 30

INTENTS: tuple[str, ...] = ("refund", "track", "address_change")
DIFFICULTIES: tuple[str, ...] = ("easy", "hard")
TONES: tuple[str, ...] = tuple(shop_text.TONES)

#: The complication a hard situation carries half the time, by intent.
COMPLICATIONS: dict[str, str] = {
    "refund": "past_window",
    "track": "two_in_transit",
    "address_change": "already_shipped",
}

_STATUS_BEHIND = {"delivered": "shipped", "shipped": "processing", "processing": "processing"}
_WRITE_TOOLS = frozenset({"refund_order", "update_address"})
#: what a partial answer keeps, so it still looks whole
_IDS = frozenset({"order_id", "email"})


_EMAIL = {"type": "string", "description": "the customer's account email"}
_ORDER_ID = {"type": "string", "description": "the order id, e.g. A1234"}


@functools.lru_cache(maxsize=16)
def _shop_tools_for(refund_window_days: int) -> tuple[dict[str, Any], ...]:
    return tuple(shop_tools(refund_window_days))


def shop_tools(refund_window_days: int) -> list[dict[str, Any]]:
    """The shop's tools in OpenAI format; the descriptions carry the shop's policy."""
    return [
        function_tool("get_account", "Look up a customer account by email.", {"email": _EMAIL}),
        function_tool(
            "list_orders", "List the orders placed with an account email.", {"email": _EMAIL}
        ),
        function_tool(
            "get_order",
            "Get one order: item, price, status, dates, tracking, shipping address, refund.",
            {"order_id": _ORDER_ID},
        ),
        function_tool(
            "refund_order",
            "Refund a delivered order. Policy: only within "
            f"{refund_window_days} days of delivery (see refund_window_ends on the order), "
            "only for the customer who placed it, and once.",
            {
                "order_id": _ORDER_ID,
                "reason": {"type": "string", "description": "why the customer wants a refund"},
            },
        ),
        function_tool(
            "update_address",
            "Change the shipping address of an order that has not shipped yet.",
            {
                "order_id": _ORDER_ID,
                "address": {"type": "string", "description": "the full new shipping address"},
            },
        ),
    ]


# -- the shop's contents ---------------------------------------------------------------------


def _iso(day: dt.date | None) -> str | None:
    return day.isoformat() if day is not None else None


def _address(rng: random.Random) -> str:
    return f"{rng.randint(1, 220)} {rng.choice(shop_text.STREETS)}, {rng.choice(shop_text.CITIES)}"


def _email(first: str, last: str, rng: random.Random) -> str:
    return f"{first}.{last}{rng.randint(1, 99)}@example.com".lower()


def _order(
    order_id: str,
    email: str,
    item: str,
    price: float,
    status: str,
    days_ago: int,
    address: str,
    rng: random.Random,
) -> dict[str, Any]:
    """One order record. ``days_ago`` is days since delivery for a delivered order, else
    days since it was placed."""
    delivered = TODAY - dt.timedelta(days=days_ago) if status == "delivered" else None
    placed = (delivered or TODAY) - dt.timedelta(days=rng.randint(2, 6) if delivered else days_ago)
    return {
        "order_id": order_id,
        "email": email,
        "item": item,
        "price": price,
        "status": status,
        "placed": _iso(placed),
        "delivered": _iso(delivered),
        "tracking": None if status == "processing" else f"1Z{rng.randrange(10**9, 10**10)}",
        "shipping_address": address,
        "refunded": False,
    }


def _copy_orders(orders: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """A copy of the shop's orders: each order is one level of plain values, so a copy of
    each order is a deep copy, at a fraction of ``copy.deepcopy``'s cost per rollout."""
    return {order_id: dict(order) for order_id, order in orders.items()}


def build_orders(situation: Situation) -> dict[str, dict[str, Any]]:
    """Every order in the shop for one situation: the target order (from the situation's
    hidden state), the customer's other orders and two other customers' orders (drawn from a
    seed derived from the situation id, so every rollout of a situation sees the same shop)."""
    known = situation.hidden_state
    missing = [k for k in ("email", "order_id", "item", "status", "days_ago") if k not in known]
    if missing:
        raise ValueError(
            f"situation {situation.situation_id!r}: the shop world needs hidden_state keys "
            f"{missing} (the customer's order it is about)"
        )
    rng = random.Random(seed_of(situation.situation_id))
    email = str(known["email"])
    target = _order(
        str(known["order_id"]),
        email,
        str(known["item"]),
        float(known.get("price", dict(shop_text.ITEMS).get(str(known["item"]), 25.0))),
        str(known["status"]),
        int(known["days_ago"]),
        str(known.get("old_address") or _address(rng)),
        rng,
    )
    orders = {target["order_id"]: target}
    used_items = {target["item"]}

    def new_id() -> str:
        while True:
            candidate = f"A{rng.randrange(1000, 10000)}"
            if candidate not in orders:
                return candidate

    def add(owner: str, status: str, days_ago: int, item: str | None = None) -> None:
        if item is None:
            choices = [i for i in shop_text.ITEMS if i[0] not in used_items]
            name, price = rng.choice(choices)
        else:
            name, price = item, dict(shop_text.ITEMS)[item]
        used_items.add(name)
        order = _order(
            new_id(), owner, name, price, status, days_ago, target["shipping_address"], rng
        )
        orders[order["order_id"]] = order

    for _ in range(rng.randint(1, 2)):
        add(email, "delivered", rng.randint(40, 200))
    if situation.goal.get("complication") == "two_in_transit":
        add(email, "shipped", rng.randint(1, 4))
    for _ in range(2):
        first, last = rng.choice(shop_text.FIRST_NAMES), rng.choice(shop_text.LAST_NAMES)
        other = _email(first, last, rng)
        if other == email:
            continue
        add(other, "delivered", rng.randint(3, 20))
        # Another customer owns the same item as the target, so acting on "the teapot order"
        # without checking whose it is gets caught.
        same_item = target["item"] if target["item"] in dict(shop_text.ITEMS) else None
        add(other, str(known["status"]), rng.randint(1, 4), item=same_item)
    return orders


# -- the world ---------------------------------------------------------------------------------


#: The shop's deploy prompt: what ``simulate()`` runs the agent under when you give none.
SYSTEM_PROMPT = (
    "You are a customer support agent. Look things up with the tools before you answer, "
    "say plainly what you did, and never invent an order, refund or account detail. Tell "
    "customers about the order they mean and never about another customer's."
)
#: The simulated customer's instructions (fields: see ``whileai.worlds.USER_PROMPT_FIELDS``).
USER_PROMPT = (
    "You are {persona}, chatting with a support agent. What you want: {request}\n"
    "What you know (give it when asked): {known}\n"
    "Reply as the customer in one or two short sentences. When your problem is solved, "
    "thank the agent and end with {done}. If you have had enough, end with {give_up}."
)
#: What a model writer is told when it words a shop situation.
WRITER_PROMPT = (
    "You write the first message a customer sends to a support chat. Reply with that message only."
)


@attrs.frozen
class ShopWorld:
    """A shop with orders, refunds and accounts.

    Options: ``fault_plan`` (the plan used when the engine passes none; see
    :func:`coerce_fault_plan`), ``default_fault_rate`` (the rate of a plan with no rate of its
    own) and ``refund_window_days``. The shop's defaults (``whileai.worlds.WorldDefaults``):
    the customer-support deploy prompt, the customer the simulated user plays, and
    ``difficulty`` = ``hard`` as the hard end of its situations.
    """

    system_prompt: ClassVar[str] = SYSTEM_PROMPT
    user_prompt: ClassVar[str] = USER_PROMPT
    writer_prompt: ClassVar[str] = WRITER_PROMPT
    difficulty_dimension: ClassVar[str] = "difficulty"
    hard_value: ClassVar[str] = "hard"

    fault_plan: FaultPlan | None = attrs.field(default=None, converter=coerce_fault_plan)
    default_fault_rate: float = attrs.field(
        default=DEFAULT_FAULT_RATE, validator=rate_in_unit_interval
    )
    refund_window_days: int = REFUND_WINDOW_DAYS
    name: str = "shop"
    # 2: telling another order's tracking number fails (another customer's, or in a tracking
    # request any but the one asked about)
    # 3: a refused refund or address change fails unless the agent says why
    version: str = "3"
    #: the shop of each recent situation: every rollout of a situation plays the same shop
    #: (its orders drawn from the situation's own seed), so it is drawn once and copied
    _shops: dict[str | bytes, dict[str, dict[str, Any]]] = attrs.field(
        factory=dict, init=False, eq=False, repr=False
    )

    def __attrs_post_init__(self) -> None:
        if self.refund_window_days < 0:
            raise ValueError(f"refund_window_days must be >= 0, got {self.refund_window_days!r}")

    def tools(self) -> list[dict[str, Any]]:
        # asked once per episode: built once per refund window (a tool spec is read, never
        # written; each caller gets a list of its own)
        return list(_shop_tools_for(self.refund_window_days))

    def dimensions(self) -> dict[str, list[Any]]:
        """``intent`` (what the customer wants), ``difficulty`` (``hard``: details withheld,
        half the time a complication) and ``tone`` (how the customer writes and how patient
        they are)."""
        return {"intent": list(INTENTS), "difficulty": list(DIFFICULTIES), "tone": list(TONES)}

    def template_situation(
        self, spec: Mapping[str, Any], rng: random.Random, phrasing: int = 0
    ) -> Situation:
        """A situation from templates. Dimension values missing from ``spec`` are drawn from
        ``rng``. The facts are drawn the same way whatever ``phrasing`` is, so phrasings of
        one rng state are one situation worded differently."""
        if phrasing < 0:
            raise ValueError(f"phrasing must be >= 0, got {phrasing!r}")
        intent = choose("shop", spec, "intent", INTENTS, rng)
        difficulty = choose("shop", spec, "difficulty", DIFFICULTIES, rng)
        tone = choose("shop", spec, "tone", TONES, rng)
        first, last = rng.choice(shop_text.FIRST_NAMES), rng.choice(shop_text.LAST_NAMES)
        email = _email(first, last, rng)
        item, price = rng.choice(shop_text.ITEMS)
        order_id = f"A{rng.randrange(1000, 10000)}"
        problem = rng.choice(shop_text.PROBLEMS)
        new_address = _address(rng)
        complicated = difficulty == "hard" and rng.random() < 0.5
        complication = COMPLICATIONS[intent] if complicated else None
        tag = rng.getrandbits(32)

        if intent == "refund":
            status = "delivered"
            window = self.refund_window_days
            days_ago = rng.randint(window + 5, window + 60) if complicated else rng.randint(2, 20)
            outcome = "not_refunded" if complicated else "refunded"
        elif intent == "track":
            status, days_ago, outcome = "shipped", rng.randint(1, 4), "tracking_told"
        else:
            status = "shipped" if complicated else "processing"
            days_ago = rng.randint(1, 3)
            outcome = "not_updated" if complicated else "address_updated"

        disclosure = "withheld" if difficulty == "hard" else "full"
        templates = shop_text.TEMPLATES[intent][disclosure]
        openers, closer = shop_text.TONES[tone]
        body = templates[phrasing % len(templates)].format(
            order_id=order_id, email=email, item=item, problem=problem, address=new_address
        )
        prompt = f"{openers[(phrasing // len(templates)) % len(openers)]}{body}{closer}"

        hidden: dict[str, Any] = {
            "name": f"{first} {last}",
            "email": email,
            "order_id": order_id,
            "item": item,
            "price": price,
            "status": status,
            "days_ago": days_ago,
            "withheld_until_asked": ["order_id", "email"] if disclosure == "withheld" else [],
        }
        if intent == "refund":
            hidden["problem"] = problem
        if intent == "address_change":
            hidden["new_address"] = new_address
        goal = {
            "intent": intent,
            "order_id": order_id,
            "outcome": outcome,
            # the grader's label for what makes the situation hard; the user does not know it
            "complication": complication,
            "summary": _goal_summary(outcome, order_id, new_address, self.refund_window_days),
        }
        return Situation(
            situation_id=f"shop-{intent}-{difficulty}-{tag:08x}",
            prompt=prompt,
            persona=f"{first} {last}, a {tone} customer",
            patience=shop_text.PATIENCE[tone],
            dimensions={"intent": intent, "difficulty": difficulty, "tone": tone},
            hidden_state=hidden,
            goal=goal,
        )

    # -- a model writer writes whole situations from the shop's facts ---------------------

    def situation_facts(self, spec: Mapping[str, Any], rng: random.Random) -> dict[str, Any]:
        """The shop of one episode as the writer sees it: the customer, every order they
        hold, which one the situation is about and what a good rollout reaches there."""
        base = self.template_situation(spec, rng)
        orders = build_orders(base)
        email = str(base.hidden_state["email"])
        return {
            "situation_id": base.situation_id,
            "intent": base.dimensions["intent"],
            "difficulty": base.dimensions["difficulty"],
            "tone": base.dimensions["tone"],
            "customer": {"name": base.hidden_state["name"], "email": email},
            "orders": [
                {k: o[k] for k in ("order_id", "item", "status", "placed", "delivered")}
                for o in orders.values()
                if o["email"] == email
            ],
            "order_in_question": base.hidden_state["order_id"],
            "withhold_until_asked": list(base.hidden_state["withheld_until_asked"]),
            "expected_outcome": base.goal["outcome"],
            "refund_window_days": self.refund_window_days,
            "hidden_state": dict(base.hidden_state),
            "goal": dict(base.goal),
        }

    def situation_schema(self) -> dict[str, Any]:
        return {
            "type": "object",
            "required": [
                "request",
                "persona",
                "patience",
                "order_id",
                "reference",
                "principle",
                "rubric",
            ],
            "properties": {
                "request": {
                    "type": "string",
                    "description": "the customer's first message, in their own words and tone",
                },
                "persona": {"type": "string", "description": "who the customer is, one line"},
                "patience": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 6,
                    "description": "follow-ups the customer gives before giving up",
                },
                "order_id": {"type": "string", "description": "the order the situation is about"},
                "reference": {
                    "type": "string",
                    "description": "what a good agent does and reaches, for the judge",
                },
                "principle": {"type": "string", "description": "the rule a good agent keeps"},
                "rubric": {"type": "string", "description": "how to grade the rollout"},
            },
        }

    def situation_from_written(
        self, spec: Mapping[str, Any], facts: Mapping[str, Any], written: Mapping[str, Any]
    ) -> Situation:
        """The written situation, checked against the shop it is set in: every field there,
        the order in question named, no order the customer does not hold, and a hard
        situation's request withholding what the customer gives only when asked."""
        schema = self.situation_schema()
        missing = [k for k in schema["required"] if k not in written]
        if missing:
            raise ValueError(f"the situation lacks {', '.join(missing)}")
        for key, kind in (("request", str), ("persona", str), ("order_id", str)):
            if not isinstance(written[key], kind) or not str(written[key]).strip():
                raise ValueError(f"{key} must be non-empty text, got {written[key]!r}")
        patience = written["patience"]
        if isinstance(patience, bool) or not isinstance(patience, int) or not 1 <= patience <= 6:
            raise ValueError(f"patience must be a whole number from 1 to 6, got {patience!r}")
        held = {o["order_id"] for o in facts["orders"]}
        target = str(facts["order_in_question"])
        if written["order_id"] != target:
            where = (
                "one of the customer's"
                if written["order_id"] in held
                else "no order the shop holds"
            )
            raise ValueError(
                f"order_id {written['order_id']!r} is {where}; the situation is about {target}"
            )
        request = str(written["request"])
        for named in re.findall(r"\bA\d{4}\b", request):
            if named not in held:
                raise ValueError(f"the request names order {named}, which the shop does not hold")
            if named != target:
                raise ValueError(f"the request names order {named}, not {target}")
        email = str(facts["customer"]["email"])
        withheld = facts["withhold_until_asked"]
        if withheld:
            shown = [
                what for what, value in (("order id", target), ("email", email)) if value in request
            ]
            if shown:
                raise ValueError(
                    f"a {facts['difficulty']} situation's request must not give the "
                    f"{' or '.join(shown)}: the customer gives it only when asked"
                )
        elif target not in request:
            raise ValueError(f"the request must name the order in question, {target}")
        return Situation(
            situation_id=str(facts["situation_id"]),
            prompt=request.strip(),
            persona=str(written["persona"]).strip(),
            patience=patience,
            dimensions={k: facts[k] for k in ("intent", "difficulty", "tone")},
            hidden_state=dict(facts["hidden_state"]),
            goal=dict(facts["goal"]),
            reference=str(written["reference"]),
            principle=str(written["principle"]),
            rubric=str(written["rubric"]),
        )

    def new_episode(
        self, situation: Situation, rng: random.Random, fault_plan: FaultPlan | None = None
    ) -> ShopEpisode:
        """A fresh shop for one rollout. ``fault_plan`` wins over the world's own plan; with
        neither, every fault kind may fire at ``default_fault_rate``."""
        plan = fault_plan or self.fault_plan or FaultPlan()
        return ShopEpisode(
            situation=situation,
            orders=self._orders_for(situation),
            rng=rng,
            plan=plan,
            rate=plan.effective_rate(self.default_fault_rate),
            refund_window_days=self.refund_window_days,
        )

    def _orders_for(self, situation: Situation) -> dict[str, dict[str, Any]]:
        """A fresh copy of ``situation``'s shop (:func:`build_orders`)."""
        basis = key_text([situation.situation_id, situation.hidden_state, situation.goal])
        if basis is None:
            return build_orders(situation)
        orders = self._shops.get(basis)
        if orders is None:
            orders = build_orders(situation)
            if len(self._shops) >= SHOPS_KEPT:
                # a run plays a situation's rollouts close together: the oldest goes first
                # (another thread may have let it go already)
                with contextlib.suppress(RuntimeError, StopIteration):
                    self._shops.pop(next(iter(self._shops)), None)
            self._shops[basis] = orders
        return _copy_orders(orders)


#: How many situations' shops a world keeps (each a few orders, about 2 KB).
SHOPS_KEPT = 512


def _goal_summary(outcome: str, order_id: str, address: str, window: int) -> str:
    return {
        "refunded": f"order {order_id} is refunded exactly once",
        "not_refunded": f"order {order_id} is not refunded: it was delivered more than "
        f"{window} days ago, outside the refund window, and the agent says so",
        "tracking_told": f"the agent tells the customer the tracking number of order {order_id}",
        "address_updated": f"order {order_id} ships to {address}",
        "not_updated": f"order {order_id} has already shipped, so its address cannot change, "
        "and the agent says so",
    }[outcome]


# -- one rollout's shop --------------------------------------------------------------------


#: Words that give the reason for a refused refund or address change. A refusal must say
#: why (the goal's "and the agent says so"): a lookup and then silence, or "all done", fails.
_TOLD_PAST_WINDOW = re.compile(
    r"\b(?:window|eligib\w*|expired|too late|too long ago|deadline"
    r"|(?:refund|return)s? (?:policy|period))\b",
    re.IGNORECASE,
)
_TOLD_SHIPPED = re.compile(
    r"\b(?:shipped|dispatched|in transit|on (?:its|the) way|sent out|out for delivery"
    r"|courier|carrier|left (?:our|the) warehouse)\b",
    re.IGNORECASE,
)


def _normalise_address(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", text.lower()).strip()


@attrs.define
class ShopEpisode:
    """One rollout's private shop. ``call`` answers tools, ``check`` grades the rollout."""

    situation: Situation
    orders: dict[str, dict[str, Any]]
    rng: random.Random
    plan: FaultPlan
    rate: float
    refund_window_days: int = REFUND_WINDOW_DAYS
    #: every call the agent made, with what it did: the ground truth ``check`` reads
    actions: list[dict[str, Any]] = attrs.Factory(list)
    _faults: list[dict[str, Any]] = attrs.Factory(list)
    _initial: dict[str, dict[str, Any]] = attrs.Factory(dict)
    _calls: int = 0

    def __attrs_post_init__(self) -> None:
        self._initial = _copy_orders(self.orders)

    @property
    def customer(self) -> str:
        return str(self.situation.hidden_state["email"])

    @property
    def target(self) -> str:
        return str(self.situation.hidden_state["order_id"])

    # -- tools -----------------------------------------------------------------------------
    def call(self, name: str, arguments: Mapping[str, Any], step: int | None = None) -> ToolResult:
        """Answer one tool call. ``step`` is the engine's index of the step the call belongs
        to; without it the call's ordinal within the episode (0-based) is recorded."""
        index = self._calls if step is None else step
        self._calls += 1
        return answer_call(
            name,
            arguments,
            index,
            handlers={n: functools.partial(h, self.orders) for n, h in self._handlers().items()},
            stale=lambda fresh: self._stale_answer(name, arguments),
            rng=self.rng,
            plan=self.plan,
            rate=self.rate,
            service="the shop service",
            keep=_IDS,
            actions=self.actions,
            faults=self._faults,
        )

    def _handlers(self) -> dict[str, Callable[..., Any]]:
        return {
            "get_account": self._get_account,
            "list_orders": self._list_orders,
            "get_order": self._get_order,
            "refund_order": self._refund_order,
            "update_address": self._update_address,
        }

    def _lagging(self) -> dict[str, dict[str, Any]]:
        """The shop as a lagging replica sees it: the episode's start, one status behind."""
        lagging = _copy_orders(self._initial)
        for order in lagging.values():
            order["status"] = _STATUS_BEHIND[order["status"]]
            if order["status"] != "delivered":
                order["delivered"] = None
            if order["status"] == "processing":
                order["tracking"] = None
        return lagging

    def _stale_answer(self, name: str, arguments: Mapping[str, Any]) -> Any:
        read = {"refund_order": "get_order", "update_address": "get_order"}.get(name, name)
        try:
            return self._handlers()[read](self._lagging(), arguments, {})
        except Refused as exc:
            return {"error": str(exc)}

    def _find(
        self, orders: Mapping[str, dict[str, Any]], arguments: Mapping[str, Any]
    ) -> dict[str, Any]:
        order_id = required_text(arguments, "order_id").upper().lstrip("#")
        if order_id not in orders:
            raise Refused(f"no order {order_id}")
        return orders[order_id]

    def _view(self, order: Mapping[str, Any]) -> dict[str, Any]:
        view = dict(order)
        if order["delivered"] is not None:
            delivered = dt.date.fromisoformat(order["delivered"])
            ends = delivered + dt.timedelta(days=self.refund_window_days)
            view["refund_window_ends"] = ends.isoformat()
        view["today"] = TODAY.isoformat()
        return view

    def _get_account(
        self,
        orders: Mapping[str, dict[str, Any]],
        arguments: Mapping[str, Any],
        action: dict[str, Any],
    ) -> Any:
        email = required_text(arguments, "email").lower()
        owned = sorted(o["order_id"] for o in orders.values() if o["email"] == email)
        if not owned:
            raise Refused(f"no account with email {email}")
        action["email"] = email
        return {"email": email, "order_ids": owned}

    def _list_orders(
        self,
        orders: Mapping[str, dict[str, Any]],
        arguments: Mapping[str, Any],
        action: dict[str, Any],
    ) -> Any:
        email = required_text(arguments, "email").lower()
        owned = [o for o in orders.values() if o["email"] == email]
        if not owned:
            raise Refused(f"no account with email {email}")
        action["email"] = email
        summary = ("order_id", "item", "status", "placed", "delivered")
        return {
            "email": email,
            "orders": [
                {k: o[k] for k in summary} for o in sorted(owned, key=lambda o: o["placed"])
            ],
        }

    def _get_order(
        self,
        orders: Mapping[str, dict[str, Any]],
        arguments: Mapping[str, Any],
        action: dict[str, Any],
    ) -> Any:
        order = self._find(orders, arguments)
        action["order_id"] = order["order_id"]
        return self._view(order)

    def _refund_order(
        self,
        orders: Mapping[str, dict[str, Any]],
        arguments: Mapping[str, Any],
        action: dict[str, Any],
    ) -> Any:
        order = self._find(orders, arguments)
        reason = required_text(arguments, "reason")
        action["order_id"] = order["order_id"]
        if order["status"] != "delivered":
            raise Refused(f"order {order['order_id']} is {order['status']}, not delivered")
        if order["refunded"]:
            raise Refused(f"order {order['order_id']} is already refunded")
        # The tool does not enforce the window: keeping the policy is the agent's job, and
        # check() reports a refund outside it.
        order["refunded"] = True
        order["refund_reason"] = reason
        action["effect"] = "refunded"
        return {"order_id": order["order_id"], "refunded": True, "amount": order["price"]}

    def _update_address(
        self,
        orders: Mapping[str, dict[str, Any]],
        arguments: Mapping[str, Any],
        action: dict[str, Any],
    ) -> Any:
        order = self._find(orders, arguments)
        address = required_text(arguments, "address")
        action["order_id"] = order["order_id"]
        if order["status"] != "processing":
            raise Refused(
                f"order {order['order_id']} has already {order['status']}; "
                "its address can no longer change"
            )
        order["shipping_address"] = address
        action["effect"] = "address_updated"
        return {"order_id": order["order_id"], "shipping_address": address}

    # -- what goes on the row --------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """The shop at the end of the rollout and what the agent changed. Which order the
        customer meant is not in it (that is the situation's hidden state)."""
        return {
            "orders": _copy_orders(self.orders),
            "changes": [
                {
                    "step": a["step"],
                    "tool": a["tool"],
                    "order_id": a["order_id"],
                    "effect": a["effect"],
                }
                for a in self.actions
                if a.get("effect")
            ],
            "tool_calls": len(self.actions),
        }

    def faults(self) -> list[dict[str, Any]]:
        return [dict(f) for f in self._faults]

    def check(self, final_text: str, steps: Sequence[Mapping[str, Any]]) -> Verdict:
        """Pass when the goal state is reached and no constraint is broken; the reason names
        every failure. Constraints: no change to another customer's order, no change to an
        order the customer did not mean, no refund outside the window, no other customer's
        tracking number told, and asked for tracking, no other order's."""
        goal = self.situation.goal
        outcome = str(goal.get("outcome", ""))
        failures: list[str] = []
        changes = [a for a in self.actions if a.get("effect")]
        for change in changes:
            order = self.orders[change["order_id"]]
            what = f"{change['effect'].replace('_', ' ')} order {order['order_id']}"
            if order["email"] != self.customer:
                failures.append(f"{what}, which belongs to another customer")
            elif order["order_id"] != self.target:
                failures.append(
                    f"{what}, which is not the order the customer meant ({self.target})"
                )
            elif (
                change["effect"] == "refunded"
                and self._days_since_delivery(order) > self.refund_window_days
            ):
                failures.append(
                    f"{what} {self._days_since_delivery(order)} days after delivery, outside "
                    f"the {self.refund_window_days}-day refund window"
                )
        target = self.orders[self.target]
        texts = [
            final_text,
            *(str(s.get("content") or "") for s in steps if s.get("role") == "assistant"),
        ]
        failures.extend(self._other_tracking_told(texts, outcome))
        refunds = sum(
            1 for c in changes if c["order_id"] == self.target and c["effect"] == "refunded"
        )
        looked_up = self._looked_up_target()
        if outcome == "refunded" and refunds != 1:
            failures.append(f"order {self.target} was refunded {refunds} times, not once")
        elif outcome == "not_refunded":
            if not looked_up:
                failures.append(f"the agent never looked up order {self.target}")
            # a refund outside the window is failure enough: say so only of a refusal
            if not refunds and not any(self._told_past_window(t, target) for t in texts):
                failures.append(
                    "the agent never told the customer the order is past the "
                    f"{self.refund_window_days}-day refund window"
                )
        elif outcome == "tracking_told":
            if not looked_up:
                failures.append(f"the agent never looked up order {self.target}")
            if target["tracking"] and not any(target["tracking"] in t for t in texts):
                failures.append(
                    f"the agent never told the customer tracking number {target['tracking']}"
                )
        elif outcome == "address_updated":
            wanted = str(self.situation.hidden_state.get("new_address", ""))
            if _normalise_address(target["shipping_address"]) != _normalise_address(wanted):
                failures.append(
                    f"order {self.target} ships to {target['shipping_address']!r}, not {wanted!r}"
                )
        elif outcome == "not_updated":
            if not looked_up:
                failures.append(f"the agent never looked up order {self.target}")
            if not any(_TOLD_SHIPPED.search(t) for t in texts):
                failures.append("the agent never told the customer the order has already shipped")
        elif outcome not in (
            "refunded",
            "not_refunded",
            "tracking_told",
            "address_updated",
            "not_updated",
        ):
            return Verdict.error(f"situation goal has no known outcome: {outcome!r}")
        meta = {
            "world": "shop",
            "outcome": outcome,
            "changes": len(changes),
            "faults": len(self._faults),
        }
        # what the reasons quote of the shop that the situation's facts do not hold
        quotes = [
            str(v) for v in (target["tracking"], target["shipping_address"], self.target) if v
        ]
        if failures:
            return Verdict(0.0, "; ".join(failures), "ok", meta, quotes=quotes)
        return Verdict(
            1.0,
            f"goal reached ({goal.get('summary', outcome)}); no constraint broken",
            "ok",
            meta,
            quotes=quotes,
        )

    def _told_past_window(self, text: str, order: Mapping[str, Any]) -> bool:
        """Whether ``text`` gives the reason a refund is refused: the refund window or policy,
        its length in days, the day it ended, how long ago or on what day the order was
        delivered, or the order no longer being eligible. Saying nothing, or "all done", leaves
        the customer not knowing why."""
        ends = self._view(order).get("refund_window_ends")
        lengths = {self.refund_window_days, self._days_since_delivery(order)}
        return bool(
            _TOLD_PAST_WINDOW.search(text)
            or any(re.search(rf"\b{n}(?:-| )?days?\b", text, re.IGNORECASE) for n in lengths)
            or (ends and ends in text)
            or (order["delivered"] and order["delivered"] in text)
        )

    def _other_tracking_told(self, texts: Sequence[str], outcome: str) -> list[str]:
        """The tracking numbers of other orders the agent told: another customer's never, and
        in a tracking request none but the target's (reciting every tracking number would
        pass without working out which order the customer meant)."""
        failures = []
        for order in sorted(self.orders.values(), key=lambda o: o["order_id"]):
            tracking = order["tracking"]
            if not tracking or order["order_id"] == self.target:
                continue
            if not any(tracking in t for t in texts):
                continue
            told = f"told tracking number {tracking} of order {order['order_id']}"
            if order["email"] != self.customer:
                failures.append(f"{told}, which belongs to another customer")
            elif outcome == "tracking_told":
                failures.append(f"also {told}, not the order the customer asked about")
        return failures

    def _days_since_delivery(self, order: Mapping[str, Any]) -> int:
        return (TODAY - dt.date.fromisoformat(order["delivered"])).days

    def _looked_up_target(self) -> bool:
        """Whether a call that reached the shop named the target order or its owner (a write
        the shop refused counts: its answer said what state the order is in)."""
        for action in self.actions:
            if action.get("fault") in BLOCKING_KINDS:
                continue
            if action.get("order_id") == self.target or action.get("email") == self.customer:
                return True
        return False
