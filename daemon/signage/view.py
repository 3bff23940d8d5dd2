"""What the table display shows, built from the table's public MQTT messages (no I/O, no clock).

:class:`SignageView` takes each public message (already JSON-decoded to builtins) with its topic suffix
(``status``, ``round``, ``results``, ``settlements``, ``scoreboard``, ``info``, ``devices/{name}``) and
keeps the display model that :meth:`SignageView.to_dict` hands to the browser. Message shapes are those
of :mod:`daemon.messages` and :mod:`daemon.scoreboard`; unknown fields are ignored and a message of the
wrong shape is counted in ``rejected`` and skipped, never raised.

The model is language-neutral where the page must translate: positions (``player``, ``banker``,
``dealer``, ``board``, a box or seat number), settlement categories (``perfect_pair``,
``ace_king_suited`` ...), wager names (``perfect_pairs``), odds (``"25 to 1"``) and phases are keys the
page looks up in its language (static/i18n.js); English ``label``/``text`` fields come along for other
consumers of ``GET /state``.

What is shown when (the rules decide what is public; the daemon publishes it at that moment):

* the cards: the round's public cards (``round``); between rounds the last round's cards from
  ``results`` (baccarat: Player and Banker; blackjack: each box's first two cards and the dealer's up
  card; UTH: each seat, the dealer and the board, all revealed together at the reveal);
* pair results per box or seat (blackjack, UTH) from each pair settlement as it is published (blackjack
  Perfect Pairs settles once the box's two cards are out, Perfect Pairs rule sheet rule 8; Ultimate
  Pairs at the reveal, 58 Pa. Code § 653b.5(e)), completed by ``results``; pair banners (baccarat,
  § 627c.1) likewise;
* the last round's results, banners and box results stay until the next round's betting closes: for
  blackjack and UTH its ``dealing`` phase (no more bets), for baccarat its first card.

Offered wagers, odds lines, limits, the commission rule and the displays' default language come from
the retained table-info message on ``{prefix}/{table}/info`` (schema ``tablesense.table_info``, see
docs/signage.md) when the daemon publishes one; otherwise the display lists the side wagers and odds it
has seen in settlements (no limits).
"""

from __future__ import annotations

from typing import Any

import msgspec

from tablesense.daemon.messages import DeviceStatus, RoundResults, RoundState, SettlementMessage, TableStatus
from tablesense.daemon.rules.cards import Card, InvalidCard
from tablesense.daemon.rules.pairs import classify_pair
from tablesense.daemon.scoreboard import RoundOutcome, Scoreboard

__all__ = ["BET_LABELS", "CATEGORY_LABELS", "GAME_LABELS", "PAIR_BETS", "SignageView", "category_label",
           "format_money"]

GAME_LABELS = {"baccarat": "Baccarat", "ez-baccarat": "EZ Baccarat", "blackjack": "Blackjack",
               "uth": "Ultimate Texas Hold 'Em"}
"""Display names of the games (config ``game`` values)."""

PAIR_BETS = frozenset({"perfect_pairs", "ultimate_pairs"})
"""Wagers whose wins get a banner: Perfect Pairs (baccarat, blackjack) and UTH Ultimate Pairs."""

BET_LABELS = {"perfect_pairs": "Perfect Pairs", "ultimate_pairs": "Ultimate Pairs", "tie": "Tie",
              "dragon_bonus": "Dragon Bonus", "dragon_7": "Dragon 7", "panda_8": "Panda 8",
              "house_money": "House Money", "player": "Player", "banker": "Banker", "blackjack": "Blackjack",
              "ante": "Ante"}
"""English names of the wagers (config ``wagers`` keys)."""

CATEGORY_LABELS: dict[str, str] = {
    "player_win": "Player wins", "banker_win": "Banker wins", "tie": "Tie",
    "banker_dragon_7": "Banker wins with a three-card 7 (Dragon 7)",
    "perfect_pair": "Perfect Pair", "colored_pair": "Colored Pair", "mixed_pair": "Mixed Pair",
    "natural_win": "Natural wins", "natural_tie": "Natural tie",
    **{f"win_by_{n}": f"Wins by {n}" for n in range(4, 10)},
    "one_pair": "One hand paired", "both_pairs": "Both hands paired",
    "dragon_7": "Dragon 7 (Banker three-card 7)", "panda_8": "Panda 8 (Player three-card 8)",
    "aces_with_dealer_aces": "A-A with dealer A-A", "red_aces": "Red aces A♥ A♦", "aces": "A-A",
    "ace_king_suited": "A-K suited", "ace_queen_or_jack_suited": "A-Q or A-J suited", "ace_king": "A-K",
    "face_pair": "K-K, Q-Q or J-J", "ace_queen_or_jack": "A-Q or A-J", "low_pair": "Pair 2s–10s",
}
"""English labels of paytable lines and settlement categories (the page translates by category)."""

_TOPIC_TYPES: dict[str, type[msgspec.Struct]] = {
    "status": TableStatus, "round": RoundState, "results": RoundResults, "settlements": SettlementMessage,
    "devices": DeviceStatus}

_BETWEEN_DEALS = frozenset({"betting", "burn", "shoe_end", "complete"})
"""Phases of a next round in which the last round's results stay on screen (docs/state-machine.md)."""

_BACCARAT = frozenset({"baccarat", "ez-baccarat"})
_BOX_GAMES = frozenset({"blackjack", "uth"})
_FIXED_POSITIONS = ("player", "banker", "dealer", "board")

NOT_A_HIT = frozenset({"no_pair", "lose", "none", "void", "void_round", ""})

_CURRENCY_SIGNS = {"USD": "$", "EUR": "€", "GBP": "£", "MOP": "MOP$", "HKD": "HK$", "SGD": "S$"}


def category_label(category: str) -> str:
    """English label of a settlement category: ``"perfect_pair"`` -> ``"Perfect Pair"``,
    ``"ace_king_suited"`` -> ``"A-K suited"`` (:data:`CATEGORY_LABELS`), others capitalised word by word."""
    if category in CATEGORY_LABELS:
        return CATEGORY_LABELS[category]
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


def _who(game: str, position: str) -> str:
    if position in _FIXED_POSITIONS:
        return position.capitalize()
    return f"Seat {position}" if game == "uth" else f"Box {position}"


def _position_order(position: str) -> tuple[int, int, str]:
    if position in _FIXED_POSITIONS:
        return (_FIXED_POSITIONS.index(position), 0, "")
    return (9, int(position), "") if position.isdigit() else (9, 1 << 30, position)


def _baccarat_points(cards: list[str]) -> int | None:
    total = 0
    for text in cards:
        try:
            total += Card.parse(text).rank.baccarat_value
        except (InvalidCard, AttributeError):
            return None
    return total % 10


def _public_cards(round_state: dict[str, Any]) -> list[dict[str, Any]]:
    cards = [c for c in round_state.get("cards", []) or [] if isinstance(c, dict)]
    return sorted(cards, key=lambda c: int(c["index"]))


def _is_hit(category: str | None) -> bool:
    return bool(category) and str(category) not in NOT_A_HIT and not str(category).startswith("ineligible")


class SignageView:
    """The display model of one table, updated message by message.

    Args:
        table: the table id. ``prefix``: the topic prefix (shown on the page in operator mode only).
    """

    def __init__(self, table: str, prefix: str = "tablesense") -> None:
        self.table = table
        self.prefix = prefix
        self.game: str | None = None
        self.table_status = "unknown"
        self.status_detail = ""
        self.broker = "connecting"
        self.received = 0
        """Table messages applied so far (the page says "connecting" until the first)."""
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
        """Record the feed state: ``connecting`` (not yet connected since start), ``connected`` or
        ``disconnected`` (lost after having been connected)."""
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
            self.received += 1
            self.version += 1
        return changed

    def _handle(self, suffix: str, p: Any) -> bool:
        if not isinstance(p, dict):
            raise TypeError("payload is not a JSON object")
        if suffix == "info":
            if not isinstance(p.get("wagers", []), list) or not isinstance(p.get("main_wagers", []), list):
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
            # the next round's betting keeps the last round's results on screen; its close clears them:
            # no-more-bets (blackjack, UTH: phase "dealing") or, for baccarat, its first card
            betting = msg.phase in _BETWEEN_DEALS or (msg.game in _BACCARAT and msg.phase == "dealing")
            if msg.cards or not betting:
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
        (a round state only once that round's betting has closed: players read the last result while
        betting)."""
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

    def _pair_bet(self) -> str:
        return "ultimate_pairs" if self.game == "uth" else "perfect_pairs"

    def banners(self) -> list[dict[str, Any]]:
        """One banner per pair hit of the current (or, while betting, the last) round:
        ``{"position", "who", "category", "label", "odds", "text"}``; ``position`` is ``player``/
        ``banker`` or the box/seat, ``who``/``label``/``text`` are English."""
        game = self.game or ""
        out: dict[tuple[str, str], dict[str, Any]] = {}

        def add(position: str, category: str, odds: str | None) -> None:
            key = (position, category)
            if key in out and (out[key]["odds"] or not odds):
                return
            who, label = _who(game, position), category_label(category)
            text = f"{who} {label}" + (f" — {odds}" if odds else "")
            out[key] = {"position": position, "who": who, "category": category, "label": label, "odds": odds,
                        "text": text}

        for s in self.settlements:
            if s.get("outcome") == "win" and s.get("bet") in PAIR_BETS:
                add(str(s.get("hand") or s.get("seat", "")), str(s["category"]), s.get("odds"))
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
                    add(hand, category, self._odds_for("perfect_pairs", category))
        for box in res.get("boxes", []) or []:
            pair = box.get("pair") if isinstance(box, dict) else None
            if _is_hit(pair):
                add(str(box.get("position", "")), str(pair), self._odds_for(self._pair_bet(), str(pair)))
        return list(out.values())

    def hands(self) -> list[dict[str, Any]]:
        """The hands to draw: ``[{"position", "cards", "total", "won"}]``.

        Baccarat: always Player and Banker (``total`` the point count, ``won`` the winner's hand); blackjack:
        the dealer (up card only); UTH: the dealer and the board. Box and seat hands are in :meth:`boxes`.
        The round's public cards while it is dealt, else the last round's from its results.
        """
        game = self.game or ""
        rs = self.round_state or {}
        groups: dict[str, list[str]] = {}
        if game in _BACCARAT:
            groups = {"player": [], "banker": []}
        elif game == "blackjack":
            groups = {"dealer": []}
        elif game == "uth":
            groups = {"dealer": [], "board": []}
        res = self.results or {}
        cards = _public_cards(rs)
        if cards:
            for c in cards:
                groups.setdefault(str(c["position"]), []).append(str(c["card"]))
        elif isinstance(res.get("baccarat"), dict):
            groups["player"] = list(res["baccarat"].get("player") or [])
            groups["banker"] = list(res["baccarat"].get("banker") or [])
        elif res:
            if res.get("dealer"):
                groups["dealer"] = list(res["dealer"])
            if res.get("board"):
                groups["board"] = list(res["board"])
        bac = res.get("baccarat") if isinstance(res.get("baccarat"), dict) else None
        out = []
        for pos in sorted((p for p in groups if p in _FIXED_POSITIONS), key=_position_order):
            total = None
            if game in _BACCARAT and groups[pos]:
                total = bac[f"{pos}_total"] if bac and groups[pos] == list(bac.get(pos) or []) else \
                    _baccarat_points(groups[pos])
            out.append({"position": pos, "cards": groups[pos], "total": total,
                        "won": bool(bac and bac.get("winner") == pos)})
        return out

    def boxes(self) -> list[dict[str, Any]]:
        """Blackjack boxes / UTH seats in seat order: ``{"position", "cards", "pair", "hit", "outcome",
        "odds", "label"}``. ``pair`` is the settled category (``perfect_pair``, ``lose`` ...) from the
        box's pair settlement as soon as it is published, else the grade in the results, else ``None``;
        ``hit`` a winning grade; ``odds`` its odds (from the settlement, else the paytable); ``label``
        English. Cards: the round's public cards at the box, else the last round's results."""
        game = self.game or ""
        if game not in _BOX_GAMES:
            return []
        rs = self.round_state or {}
        res = self.results or {}
        seats: dict[str, dict[str, Any]] = {}

        def seat(position: str) -> dict[str, Any]:
            if position not in seats:
                seats[position] = {"position": position, "cards": [], "pair": None, "hit": False,
                                   "outcome": None, "odds": None, "label": ""}
            return seats[position]

        cards = _public_cards(rs)
        if cards:
            for c in cards:
                if str(c["position"]) not in _FIXED_POSITIONS:
                    seat(str(c["position"]))["cards"].append(str(c["card"]))
        elif res:
            for box in res.get("boxes", []) or []:
                if isinstance(box, dict):
                    seat(str(box.get("position")))["cards"] = [str(x) for x in box.get("cards") or []]
        for box in res.get("boxes", []) or []:
            if isinstance(box, dict) and box.get("pair") is not None:
                entry = seat(str(box.get("position")))
                entry["pair"] = str(box["pair"])
        bet = self._pair_bet()
        for s in self.settlements:
            if s.get("bet") == bet:
                entry = seat(str(s.get("seat")))
                entry["pair"], entry["outcome"] = str(s.get("category")), s.get("outcome")
                if s.get("odds"):
                    entry["odds"] = s.get("odds")
        for entry in seats.values():
            pair = entry["pair"]
            entry["hit"] = _is_hit(pair) and entry["outcome"] in (None, "win")
            if entry["hit"] and entry["odds"] is None:
                entry["odds"] = self._odds_for(bet, pair)
            if pair is None:
                entry["label"] = ""
            elif entry["hit"]:
                entry["label"] = category_label(pair) + (f" — {entry['odds']}" if entry["odds"] else "")
            elif entry["outcome"] in ("push", "void"):
                entry["label"] = "Wager returned"
            else:
                entry["label"] = "No win" if game == "uth" else "No pair"  # UTH lines are not all pairs
        return [seats[p] for p in sorted(seats, key=_position_order)]

    def outcome(self) -> dict[str, Any] | None:
        """The result shown under the cards: ``{"shoe", "round", "current", "void", "void_reason",
        "winner", "player_total", "banker_total", "natural", "text"}`` (``current``: of the round in the
        header; else the last round's, kept while the next one is open for betting), or ``None``."""
        res = self.results
        rs = self.round_state or {}
        if res is None:
            if rs.get("void"):
                return {"shoe": rs.get("shoe"), "round": rs.get("round"), "current": True, "void": True,
                        "void_reason": None, "winner": None, "player_total": None, "banker_total": None,
                        "natural": False, "text": "Round void"}
            return None
        current = (res.get("shoe"), res.get("round")) == (rs.get("shoe"), rs.get("round"))
        out: dict[str, Any] = {"shoe": res.get("shoe"), "round": res.get("round"), "current": current,
                               "void": bool(res.get("void")), "void_reason": res.get("void_reason"),
                               "winner": None, "player_total": None, "banker_total": None, "natural": False}
        bac = res.get("baccarat")
        if out["void"]:
            out["text"] = "Round void" + (f": {out['void_reason']}" if out["void_reason"] else "")
        elif isinstance(bac, dict):
            w, pt, bt = bac.get("winner"), bac.get("player_total"), bac.get("banker_total")
            out.update(winner=w, player_total=pt, banker_total=bt,
                       natural=bool(bac.get("player_natural") or bac.get("banker_natural")))
            if w == "tie":
                out["text"] = f"Tie {pt} – {bt}"
            else:
                hi, lo = (bt, pt) if w == "banker" else (pt, bt)
                out["text"] = f"{str(w).capitalize()} wins {hi} – {lo}"
        else:
            out["text"] = ""
        return out

    def _wager_entry(self, w: dict[str, Any], currency: str, digits: int) -> dict[str, Any]:
        lo, hi = w.get("min"), w.get("max")
        limits = None
        if isinstance(lo, int) and isinstance(hi, int):
            limits = f"{format_money(lo, currency, digits)} – {format_money(hi, currency, digits)}"
        lines = [{"category": str(line.get("category")),
                  "label": line.get("label") or category_label(str(line.get("category"))),
                  "odds": line.get("odds")} for line in w.get("paytable", []) or [] if isinstance(line, dict)]
        bet = str(w.get("bet"))
        return {"bet": bet, "label": w.get("label") or BET_LABELS.get(bet, category_label(bet)),
                "paytable": lines, "limits": limits,
                "min": lo if isinstance(lo, int) else None, "max": hi if isinstance(hi, int) else None}

    def wagers(self) -> tuple[str, list[dict[str, Any]]]:
        """The offered side wagers:
        ``(source, [{"bet", "label", "paytable": [{"category", "label", "odds"}], "limits", "min", "max"}])``
        with source ``info`` (table-info message), ``settlements`` (odds seen so far) or ``none``."""
        info = self.info or {}
        currency, digits = str(info.get("currency", "")), int(info.get("minor_unit", 2))
        if info.get("wagers"):
            return "info", [self._wager_entry(w, currency, digits) for w in info["wagers"]
                            if isinstance(w, dict)]
        seen: dict[str, list[dict[str, Any]]] = {}
        for (bet, category), odds in sorted(self._seen_odds.items()):
            if bet in ("player", "banker"):
                continue
            seen.setdefault(bet, []).append({"category": category, "label": category_label(category),
                                             "odds": odds})
        if not seen:
            return "none", []
        return "settlements", [{"bet": bet, "label": BET_LABELS.get(bet, category_label(bet)),
                                "paytable": lines, "limits": None, "min": None, "max": None}
                               for bet, lines in seen.items()]

    def main_wagers(self) -> list[dict[str, Any]]:
        """The main wagers (Player, Banker; blackjack; Ante) with limits and odds lines, from ``info``."""
        info = self.info or {}
        currency, digits = str(info.get("currency", "")), int(info.get("minor_unit", 2))
        return [self._wager_entry(w, currency, digits) for w in info.get("main_wagers", []) or []
                if isinstance(w, dict)]

    def commission(self) -> dict[str, Any] | None:
        """The commission rule from ``info`` (``{"rate", "unit", "rounding", "text", "unit_text"}``), or
        ``None`` when the table takes none (``unit_text``: the rounding unit as money, e.g. ``"$1"``)."""
        info = self.info or {}
        rule = info.get("commission_rule")
        if not isinstance(rule, dict):
            rate = info.get("commission")
            return {"rate": str(rate), "unit": None, "rounding": None, "unit_text": None,
                    "text": f"{rate} commission on Banker wins"} if rate else None
        unit = rule.get("unit")
        unit_text = format_money(unit, str(info.get("currency", "")), int(info.get("minor_unit", 2))) \
            if isinstance(unit, int) else None
        return {"rate": rule.get("rate"), "unit": unit, "rounding": rule.get("rounding"),
                "text": rule.get("text"), "unit_text": unit_text}

    def to_dict(self) -> dict[str, Any]:
        """The display model sent to the browser (JSON-ready builtins; see docs/signage.md)."""
        rs = self.round_state or {}
        source, wagers = self.wagers()
        info = self.info or {}
        return {
            "version": self.version,
            "table": self.table,
            "prefix": self.prefix,
            "game": self.game,
            "game_label": GAME_LABELS.get(self.game or "", self.game or ""),
            "language": str(info.get("language") or "en"),
            "table_status": self.table_status,
            "status_detail": self.status_detail,
            "broker": self.broker,
            "received": self.received,
            "phase": rs.get("phase"),
            "shoe": rs.get("shoe"),
            "round": rs.get("round"),
            "numbering": "hand" if self.game == "uth" else "round",
            "cards": rs.get("cards", []),
            "held": bool(rs.get("held", False)),
            "revealed": bool(rs.get("revealed", False)) or bool(
                self.results and (self.results.get("shoe"), self.results.get("round")) == (rs.get("shoe"),
                                                                                          rs.get("round"))),
            "void": bool(rs.get("void", False)),
            "cards_remaining": rs.get("cards_remaining"),
            "hands": self.hands(),
            "boxes": self.boxes(),
            "seats": [str(x) for x in info.get("seats", []) or []] if self.game in _BOX_GAMES else [],
            "outcome": self.outcome(),
            "results": self.results,
            "last_round": None if self.results is None or (
                (self.results.get("shoe"), self.results.get("round")) == (rs.get("shoe"), rs.get("round")))
            else self.results.get("round"),
            "banners": self.banners(),
            "wagers": wagers,
            "main_wagers": self.main_wagers(),
            "commission": self.commission(),
            "wagers_source": source,
            "scoreboard": self.scoreboard,
            "scoreboard_source": "daemon" if self.scoreboard_from_daemon else (
                "display" if self.scoreboard else None),
            "devices": dict(sorted(self.devices.items())),
            "rejected": self.rejected,
        }
