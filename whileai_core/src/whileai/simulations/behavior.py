"""What a rollout did, in a few stable words, and where its situation sits among the others.

``behavior_signature(row)`` is the compact description every row carries: the tools the agent
called in order, the faults it met, and how the rollout ended, e.g.
``"get_order>refund_order | faults timeout@get_order | satisfied"``. Two rollouts that did
the same thing have the same signature, whatever their wording, so a search can count
behaviours and a person can read one at a glance.

``situation_vector(text)`` is the offline embedding a diversity search compares situations
by: word unigrams and bigrams and character trigrams hashed (CRC-32, stable across processes)
into a fixed number of buckets, L2-normalised. It needs no model, is deterministic, and puts
rewordings of one request near each other and different requests apart; it lives in memory
for the run only (``vector`` is never exported).
"""

from __future__ import annotations

import itertools
import math
import re
import zlib
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from whileai.schema.wording import counted

#: Buckets of the hashed vector; 256 keeps distinct short requests apart (few collisions for
#: the few hundred n-grams a request has) at 2 KB per situation; convention, untested.
VECTOR_DIMS = 256

_WORD = re.compile(r"[a-z0-9]+")


def behavior_signature(row: Mapping[str, Any]) -> str:
    """The tools called in order (``>``-joined; ``no tools``), the faults met
    (``kind@tool``), and the stop reason, ``|``-separated."""
    steps: Sequence[Mapping[str, Any]] = row.get("steps") or []
    tools = [
        str(call.get("name"))
        for step in steps
        if step.get("role") == "assistant"
        for call in step.get("tool_calls") or []
    ]
    faults = [
        f"{fault.get('kind')}@{fault.get('tool')}"
        for fault in row.get("faults") or []
        if isinstance(fault, Mapping)
    ]
    ending = str(row.get("stop_reason") or ("error" if row.get("error") else "unknown"))
    parts = [">".join(tools) if tools else "no tools"]
    if faults:
        parts.append("faults " + ",".join(faults))
    parts.append(ending)
    return " | ".join(parts)


def situation_text(prompt: str, dimensions: Mapping[str, Any]) -> str:
    """What a situation's vector is taken of: its request and the cell it was drawn from."""
    cell = " ".join(f"{k} {v}" for k, v in sorted(dimensions.items(), key=lambda kv: kv[0]))
    return f"{prompt}\n{cell}"


def situation_vector(text: str, dims: int = VECTOR_DIMS) -> list[float]:
    """The hashed n-gram embedding of ``text`` (unit length; all zeros for empty text)."""
    import numpy as np  # here: importing the engine must not import numpy

    words = _WORD.findall(text.lower())
    # the words are ASCII letters and digits: a trigram of the bytes is one of the characters
    squeezed = " ".join(words).encode()
    grams = [w.encode() for w in words]
    grams += [b" ".join(pair) for pair in itertools.pairwise(grams)]
    grams += [squeezed[i : i + 3] for i in range(max(0, len(squeezed) - 2))]
    hashes = np.fromiter(map(zlib.crc32, grams), dtype=np.uint32, count=len(grams))
    # the top bit picks a sign, so collisions cancel on average instead of piling up
    signs = np.where(hashes & 0x80000000, 1.0, -1.0)
    buckets = np.bincount(hashes % dims, weights=signs, minlength=dims)
    # (whole numbers: the sums, and so the vector, are exact whatever the order)
    norm = math.sqrt(float(buckets @ buckets))
    vector: list[float] = (buckets / norm).tolist() if norm else buckets.tolist()
    return vector


def cosine_distance(a: Sequence[float], b: Sequence[float]) -> float:
    """1 - cosine similarity of two unit vectors (0: same direction, up to 2: opposite)."""
    return 1.0 - sum(x * y for x, y in zip(a, b, strict=True))


class SituationVectors(Mapping[str, "array[float]"]):
    """Every situation's vector by scenario id, as 8-byte floats (2 KB a situation, a quarter
    of a list of floats), memory only.

    A vector of the offline embedding may be left to be taken when it is read (``defer``):
    a run whose strategy neither compares situations nor learns never reads one, and a
    streamed run's ``data.trajectories`` read theirs one row at a time, so such a run keeps
    only the request and cell it already holds, by reference. A deferred vector is taken
    again when read rather than kept, so reading every trajectory does not grow the run; only
    the last one taken is kept, since a situation's rollouts are read one after another (plan
    order) and it serves them all.

    The vectors handed out are shared: a reader copies one before changing it.
    """

    def __init__(self) -> None:
        self._taken: dict[str, array[float]] = {}
        # two maps rather than one of (prompt, dimensions) pairs: a pair per situation would be
        # one more object for the garbage collector to walk in every full pass of a long run
        self._deferred: dict[str, str] = {}
        self._deferred_dimensions: dict[str, Mapping[str, Any]] = {}
        self._last: tuple[str, array[float]] | None = None

    def put(self, scenario_id: str, vector: Sequence[float]) -> None:
        self._deferred.pop(scenario_id, None)
        self._deferred_dimensions.pop(scenario_id, None)
        self._last = None
        self._taken[scenario_id] = array("d", vector)

    def defer(self, scenario_id: str, prompt: str, dimensions: Mapping[str, Any]) -> None:
        self._taken.pop(scenario_id, None)
        self._last = None
        self._deferred[scenario_id] = prompt
        self._deferred_dimensions[scenario_id] = dimensions

    def __getitem__(self, scenario_id: str) -> array[float]:
        taken = self._taken.get(scenario_id)
        if taken is not None:
            return taken
        prompt = self._deferred[scenario_id]
        last = self._last
        if last is not None and last[0] == scenario_id:
            return last[1]
        text = situation_text(prompt, self._deferred_dimensions[scenario_id])
        vector = array("d", situation_vector(text))
        self._last = (scenario_id, vector)
        return vector

    def __contains__(self, scenario_id: object) -> bool:
        return scenario_id in self._taken or scenario_id in self._deferred

    def __iter__(self) -> Iterator[str]:
        return itertools.chain(self._taken, self._deferred)

    def __len__(self) -> int:
        return len(self._taken) + len(self._deferred)


class Embedder:
    """Situation vectors: the offline embedding, or a backend's ``embed(texts)`` (each
    vector scaled to unit length). A backend that fails falls back to the offline vectors
    for that call and says so once in the run's warnings."""

    def __init__(self, backend: Any = None, label: str = "offline hashed n-grams") -> None:
        self.backend = backend
        self.label = label
        self.failed = False

    async def add(
        self,
        into: SituationVectors,
        situations: Iterable[tuple[str, str, Mapping[str, Any]]],
        warnings: list[str],
        *,
        now: bool,
    ) -> None:
        """Each situation's vector (``(scenario_id, prompt, dimensions)``) into ``into``: taken
        here when ``now`` (a strategy reads them as it goes) or when a model embeds them (one
        call per batch), else deferred to the first read."""
        listed = list(situations)
        if not now and self.backend is None:
            for scenario_id, prompt, dimensions in listed:
                into.defer(scenario_id, prompt, dimensions)
            return
        texts = [situation_text(prompt, dimensions) for _, prompt, dimensions in listed]
        for (scenario_id, _, _), vector in zip(
            listed, await self.vectors(texts, warnings), strict=True
        ):
            into.put(scenario_id, vector)

    async def vectors(self, texts: Sequence[str], warnings: list[str]) -> list[list[float]]:
        if self.backend is None or not texts:
            return [situation_vector(t) for t in texts]
        try:
            raw = await self.backend.embed(list(texts))
            if len(raw) != len(texts):
                raise ValueError(f"{counted(len(raw), 'vector')} for {counted(len(texts), 'text')}")
        except Exception as exc:
            if not self.failed:
                self.failed = True
                warnings.append(
                    f"embedding model {self.label} failed ({type(exc).__name__}: {exc}); "
                    "those situations' vectors are the offline hashed n-grams"
                )
            return [situation_vector(t) for t in texts]
        out = []
        for vector in raw:
            norm = math.sqrt(sum(float(x) * float(x) for x in vector))
            out.append([float(x) / norm for x in vector] if norm else [float(x) for x in vector])
        return out
