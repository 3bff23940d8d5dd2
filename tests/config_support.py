"""Small table configs shared by the config tests."""

from __future__ import annotations

PLAYER_TABLE = """table = "t9"
game = "baccarat"
decks = 6
seats = ["1", "2"]
[wagers.player]
min = 100
max = 1000
[spots]
"3" = { seat = "1", bet = "player" }
"""
"""A baccarat table with one Player spot (no devices, ``[mqtt]`` nor ``[journal]``)."""

SHOE_TABLE = PLAYER_TABLE + """[devices.shoe]
url = "/dev/null"
role = "shoe"
"""
""":data:`PLAYER_TABLE` with a shoe."""
