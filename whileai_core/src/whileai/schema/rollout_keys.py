"""The rollout keys a reader has met: a resumed run's (which rollouts are on disk already) and
a rows file's (which rollout a later line gives again), at a bit a rollout."""

from __future__ import annotations

from collections.abc import Collection, Iterator


class RolloutKeys(Collection[str]):
    """A set of rollout keys (``lineage.rollout_key``) held as a bit per repeat of each
    situation: a key is ``<scenario_id>/r<repeat>``, so a run of a million rollouts over a few
    thousand situations holds a few thousand bitmaps rather than a million strings. A key of
    any other form is kept as it is."""

    def __init__(self) -> None:
        self._repeats: dict[str, bytearray] = {}
        self._other: set[str] = set()
        self._n = 0

    def __len__(self) -> int:
        return self._n

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        split = _split(key)
        return key in self._other if split is None else self._has(*split)

    def __iter__(self) -> Iterator[str]:
        for scenario, bits in self._repeats.items():
            for byte, value in enumerate(bits):
                for bit in range(8):
                    if value >> bit & 1:
                        yield f"{scenario}/r{byte * 8 + bit}"
        yield from self._other

    def add(self, key: str) -> bool:
        """Add ``key``; False when it was there already."""
        split = _split(key)
        if split is None:
            if key in self._other:
                return False
            self._other.add(key)
        else:
            if self._has(*split):
                return False
            bits = self._repeats.setdefault(split[0], bytearray())
            byte, bit = divmod(split[1], 8)
            if byte >= len(bits):
                bits.extend(bytes(byte + 1 - len(bits)))
            bits[byte] |= 1 << bit
        self._n += 1
        return True

    def _has(self, scenario: str, repeat: int) -> bool:
        bits = self._repeats.get(scenario)
        byte, bit = divmod(repeat, 8)
        return bits is not None and byte < len(bits) and bool(bits[byte] >> bit & 1)


#: Repeats from here on are kept as keys: a bitmap that long would cost more than the keys.
_BITMAP_REPEATS = 1 << 20


def _split(key: str) -> tuple[str, int] | None:
    """``key`` as (scenario id, repeat) when it reads ``<scenario_id>/r<repeat>`` as a run
    writes it (the repeat in plain digits, no leading zero), else None."""
    scenario, mark, repeat = key.rpartition("/r")
    if not mark or not repeat.isdigit() or not repeat.isascii() or len(repeat) > 7:
        return None
    number = int(repeat)
    if str(number) != repeat or number >= _BITMAP_REPEATS:
        return None
    return scenario, number
