"""What the table display shows, built from the table's public MQTT messages (no I/O, no clock).

:class:`SignageView` takes each public message (already JSON-decoded to builtins) with its topic suffix
(``status``, ``round``, ``results``, ``settlements``, ``scoreboard``, ``info``, ``devices/{name}``) and
keeps the display model that :meth:`SignageView.to_dict` hands to the browser. Message shapes are those
of :mod:`daemon.messages` and :mod:`daemon.scoreboard`; unknown fields are ignored and a message of the
wrong shape is counted in ``rejected`` and skipped, never raised.

Offered side wagers, paytables and limits come from the retained table-info message on
``{prefix}/{table}/info`` (schema ``tablesense.table_info``, see docs/signage.md) when the daemon
publishes one; otherwise the display lists the wagers and odds it has seen in settlements (no limits).

Pair-win banners ("Player Perfect Pair — 25 to 1") come from winning pair settlements (Perfect Pairs,
58 Pa. Code § 627c.1; blackjack Perfect Pairs, seed 001; Ultimate Pairs, § 653b.5) and from the pairs in
the round results (graded with :func:`daemon.rules.pairs.classify_pair`), with the odds from the table
info or from a settlement of the same grade; they stay while the next round is open for betting and
are cleared by its first card.
"""

from __future__ import annotations

from typing import Any

import msgspec

from tablesense.daemon.messages import DeviceStatus, RoundResults, RoundState, SettlementMessage, TableStatus
from tablesense.daemon.rules.cards import Card, InvalidCard
from tablesense.daemon.rules.pairs import classify_pair
from tablesense.daemon.scoreboard import RoundOutcome, Scoreboard

__all__ = ["GAME_LABELS", "PAIR_BETS", "SignageView", "category_label", "format_money"]

GAME_LABELS = {"baccarat": "Baccarat", "ez-baccarat": "EZ Baccarat", "blackjack": "Blackjack",
               "uth": "Ultimate Texas Hold 'Em"}
"""Display names of the games (config ``game`` values)."""

PAIR_BETS = frozenset({"perfect_pairs", "ultimate_pairs"})
"""Wagers whose wins get a banner: Perfect Pairs (baccarat, blackjack) and UTH Ultimate Pairs."""

BET_LABELS = {"perfect_pairs": "Perfect Pairs", "ultimate_pairs": "Ultimate Pairs", "tie": "Tie",
              "dragon_bonus": "Dragon Bonus", "dragon_7": "Dragon 7", "panda_8": "Panda 8",
              "house_money": "House Money", "player": "Player", "banker": "Banker"}

_TOPIC_TYPES: dict[str, type[msgspec.Struct]] = {
    "status": TableStatus, "round": RoundState, "results": RoundResults, "settlements": SettlementMessage,
    "devices": DeviceStatus}

_BETWEEN_DEALS = frozenset({"betting", "burn", "shoe_end"})
"""Phases in which the previous round's results stay on screen (docs/state-machine.md phases)."""

NOT_A_HIT = frozenset({"no_pair", "lose", "none", "ineligible", "void", ""})

_CURRENCY_SIGNS = {"USD": "$", "EUR": "€", "GBP": "£", "MOP": "MOP$", "HKD": "HK$", "SGD": "S$"}


def category_label(category: str) -> str:
    """``"perfect_pair"`` -> ``"Perfect Pair"``; ``"ace_king_suited"`` -> ``"Ace King Suited"``."""
    return " ".join(w.capitalize() for w in category.replace("-", "_").split("_") if w)


def format_money(minor: int, currency: str = "", digits: int = 2) -> str:
    """Integer minor units as display text without floats: ``format_money(2500, "USD")`` -> ``"$25"``,
    ``format_money(2550, "USD")`` -> ``"$25.50"``; an unknown currency code is written after the amount."""
    sign = "-" if minor < 0 else ""
    whole, frac = divmod(abs(minor), 10 ** digits) if digits > 0 else (abs(minor), 0)
    text = f"{whole:,}" if frac == 0 else f"{whole:,}.{frac:0{digits}d}"
    symbol = _CURRENCY_SIGNS.get(currency.upper())
    if symbol:
        return f"{sign}{symbol}{text}"
    return f"{sign}{text} {currency}".rstrip()


def _who(game: str, hand: str | None, position: str) -> str:
    if hand in ("player", "banker"):
        return hand.capitalize()
    if position in ("player", "banker", "dealer"):
        return position.capitalize()
    return f"Seat {position}" if game == "uth" else f"Box {position}"


class SignageView:
    """The display model of one table, updated message by message.

    Args:
        table: the table id. ``prefix``: the topic prefix (shown on the page for the technician).
    """

    def __init__(self, table: str, prefix: str = "tablesense") -> None:
        self.table = table
        self.prefix = prefix
        self.game: str | None = None
        self.table_status = "unknown"
        self.status_detail = ""
        self.broker = "connecting"
        self.round_state: dict[str, Any] | None = None
        self.results: dict[str, Any] | None = None
        self.settlements: list[dict[str, Any]] = []
        self.info: dict[str, Any] | None = None
        self.devices: dict[str, str] = {}
        self.scoreboard: dict[str, Any] | None = None
        self.scoreboard_from_daemon = False
        self._local_board = Scoreboard()
        self._seen_odds: dict[tuple[str, str], str] = {}  # (bet, category) -> odds from settlements
        self._round_key: tuple[Any, Any] | None = None
        self.rejected = 0
        self.version = 0

    # --- input ------------------------------------------------------------------------------------

    def set_broker(self, state: str) -> None:
        """Record the feed state: ``connecting``, ``connected`` or ``disconnected``."""
        if state != self.broker:
            self.broker = state
            self.version += 1

    def handle(self, suffix: str, payload: Any) -> bool:
        """Apply one message received on ``{prefix}/{table}/{suffix}``; ``payload`` is the decoded JSON.

        Returns ``True`` if the display changed. A payload of the wrong shape is counted in
        :attr:`rejected` and ignored.
        """
        try:
            changed = self._handle(suffix, payload)
        except (KeyError, TypeError, ValueError, AttributeError, msgspec.ValidationError):
            changed = False
            self.rejected += 1
        if changed:
            self.version += 1
        return changed

    def _handle(self, suffix: str, p: Any) -> bool:
        if not isinstance(p, dict):
            raise TypeError("payload is not a JSON object")
        if suffix == "info":
            if not isinstance(p.get("wagers", []), list):
                raise TypeError("info.wagers is not a list")
            self.info = p
            self.game = str(p.get("game") or self.game or "") or None
            return True
        if suffix == "scoreboard":
            roads = p["roads"]
            if not isinstance(roads, dict):
                raise TypeError("roads is not an object")
            self.scoreboard = roads
            self.scoreboard_from_daemon = True
            return True
        kind = _TOPIC_TYPES.get(suffix.split("/", 1)[0])
        if kind is None:
            return False
        msg = msgspec.convert(p, type=kind)  # the daemon's message shape (daemon/messages.py), or raise
        data: dict[str, Any] = msgspec.to_builtins(msg)
        if isinstance(msg, TableStatus):
            self.table_status, self.status_detail = msg.state, msg.detail
        elif isinstance(msg, DeviceStatus):
            self.devices[msg.name] = msg.state
        elif isinstance(msg, RoundState):
            self.game = msg.game
            # betting on the next round keeps the last round's results and banners on screen; its first
            # card (or any later phase) clears them
            if msg.cards or msg.phase not in _BETWEEN_DEALS:
                self._enter_round(msg.shoe, msg.round)
            self.round_state = data
            if not self.scoreboard_from_daemon:
                board = self._local_board
                if msg.shoe is not None and board.shoe is not None and msg.shoe != board.shoe:
                    board.reset(msg.shoe)  # a new shoe: the roads start empty
                board.set_cards_remaining(msg.cards_remaining)
                if self.scoreboard is not None:
                    self.scoreboard = self._local_board.to_dict()
        elif isinstance(msg, RoundResults):
            outcome = RoundOutcome.from_results(msg)  # raises on a winner that is not a result
            self.game = msg.game
            self._enter_round(msg.shoe, msg.round)
            self.results = data
            if outcome is not None and not self.scoreboard_from_daemon and self._local_board.add(outcome):
                self.scoreboard = self._local_board.to_dict()
        elif isinstance(msg, SettlementMessage):
            self._enter_round(msg.shoe, msg.round)
            if msg.outcome == "win" and msg.odds:
                self._seen_odds[(msg.bet, msg.category)] = msg.odds
            self.settlements.append(data)
        return True

    def _enter_round(self, shoe: Any, rnd: Any) -> None:
        """A message of a later round clears the previous round's settlements, results and banners
        (a round state only once that round is being dealt: players read the last result while betting)."""
        if rnd is None:
            return
        key = (shoe, rnd)
        if key != self._round_key:
            self._round_key = key
            self.settlements = []
            if self.results is not None and (self.results.get("shoe"), self.results.get("round")) != key:
                self.results = None

    # --- output -----------------------------------------------------------------------------------

    def _odds_for(self, bet: str, category: str) -> str | None:
        if (bet, category) in self._seen_odds:
            return self._seen_odds[(bet, category)]
        for w in (self.info or {}).get("wagers", []) or []:
            if isinstance(w, dict) and w.get("bet") == bet:
                for line in w.get("paytable", []) or []:
                    if isinstance(line, dict) and line.get("category") == category:
                        return str(line.get("odds"))
        return None

    def banners(self) -> list[dict[str, Any]]:
        """One banner per pair hit of the current round: ``{"who", "category", "label", "odds", "text"}``."""
        game = self.game or ""
        out: dict[tuple[str, str], dict[str, Any]] = {}

        def add(who: str, category: str, odds: str | None) -> None:
            key = (who, category)
            if key in out and (out[key]["odds"] or not odds):
                return
            label = category_label(category)
            text = f"{who} {label}" + (f" — {odds}" if odds else "")
            out[key] = {"who": who, "category": category, "label": label, "odds": odds, "text": text}

        for s in self.settlements:
            if s.get("outcome") == "win" and s.get("bet") in PAIR_BETS:
                add(_who(game, s.get("hand"), str(s.get("seat", ""))), str(s["category"]), s.get("odds"))
        res = self.results or {}
        bac = res.get("baccarat")
        if isinstance(bac, dict):
            for hand in ("player", "banker"):
                cards = bac.get(hand) or []
                if bac.get(f"{hand}_pair") and len(cards) >= 2:
                    try:
                        kind = classify_pair(Card.parse(cards[0]), Card.parse(cards[1]))
                    except InvalidCard:
                        kind = None
                    category = kind.value if kind is not None else "pair"
                    add(hand.capitalize(), category, self._odds_for("perfect_pairs", category))
        bet = "ultimate_pairs" if game == "uth" else "perfect_pairs"
        for box in res.get("boxes", []) or []:
            pair = box.get("pair") if isinstance(box, dict) else None
            if pair and str(pair) not in NOT_A_HIT and not str(pair).startswith("ineligible"):
                add(_who(game, None, str(box.get("position", ""))), str(pair), self._odds_for(bet, str(pair)))
        return list(out.values())

    def wagers(self) -> tuple[str, list[dict[str, Any]]]:
        """The offered side wagers:
        ``(source, [{"bet", "label", "paytable": [{"label", "odds"}], "limits"}])`` with source ``info``
        (table-info message), ``settlements`` (odds seen so far) or ``none``."""
        info = self.info or {}
        currency, digits = str(info.get("currency", "")), int(info.get("minor_unit", 2))
        if info.get("wagers"):
            out = []
            for w in info["wagers"]:
                if not isinstance(w, dict):
                    continue
                lo, hi = w.get("min"), w.get("max")
                limits = None
                if isinstance(lo, int) and isinstance(hi, int):
                    limits = f"{format_money(lo, currency, digits)} – {format_money(hi, currency, digits)}"
                out.append({"bet": w.get("bet"), "label": w.get("label") or BET_LABELS.get(
                    str(w.get("bet")), category_label(str(w.get("bet")))),
                    "paytable": [{"label": line.get("label") or category_label(str(line.get("category"))),
                                  "odds": line.get("odds")} for line in w.get("paytable", []) or []
                                 if isinstance(line, dict)],
                    "limits": limits})
            return "info", out
        seen: dict[str, list[dict[str, Any]]] = {}
        for (bet, category), odds in sorted(self._seen_odds.items()):
            if bet in ("player", "banker"):
                continue
            seen.setdefault(bet, []).append({"label": category_label(category), "odds": odds})
        if not seen:
            return "none", []
        return "settlements", [{"bet": bet, "label": BET_LABELS.get(bet, category_label(bet)),
                                "paytable": lines, "limits": None} for bet, lines in seen.items()]

    def to_dict(self) -> dict[str, Any]:
        """The display model sent to the browser (JSON-ready builtins; see docs/signage.md)."""
        rs = self.round_state or {}
        source, wagers = self.wagers()
        return {
            "version": self.version,
            "table": self.table,
            "prefix": self.prefix,
            "game": self.game,
            "game_label": GAME_LABELS.get(self.game or "", self.game or ""),
            "table_status": self.table_status,
            "status_detail": self.status_detail,
            "broker": self.broker,
            "phase": rs.get("phase"),
            "shoe": rs.get("shoe"),
            "round": rs.get("round"),
            "cards": rs.get("cards", []),
            "held": bool(rs.get("held", False)),
            "void": bool(rs.get("void", False)),
            "cards_remaining": rs.get("cards_remaining"),
            "results": self.results,
            "last_round": None if self.results is None or self.results.get("round") == rs.get("round")
            else self.results.get("round"),
            "banners": self.banners(),
            "wagers": wagers,
            "wagers_source": source,
            "scoreboard": self.scoreboard,
            "scoreboard_source": "daemon" if self.scoreboard_from_daemon else (
                "display" if self.scoreboard else None),
            "devices": dict(sorted(self.devices.items())),
            "rejected": self.rejected,
        }
