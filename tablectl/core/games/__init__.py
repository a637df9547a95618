"""The games a table can run: one module each, chosen by the config's `[game] name`."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from tablectl.core.games import let_it_ride, three_card_poker, ultimate_texas_holdem
from tablectl.core.games.base import TableGame

# Each game's configuration section; the `name` key picks the model.
GameConfig = Annotated[
    three_card_poker.ThreeCardPokerConfig
    | ultimate_texas_holdem.UltimateTexasHoldemConfig
    | let_it_ride.LetItRideConfig,
    Field(discriminator="name"),
]

# Most betting positions each game's table may have (649a.2(a), 653a.2(a)).
MAX_SEATS = {
    three_card_poker.NAME: three_card_poker.MAX_SEATS,
    ultimate_texas_holdem.NAME: ultimate_texas_holdem.MAX_SEATS,
    let_it_ride.NAME: let_it_ride.MAX_SEATS,
}
SEAT_RULES = {
    three_card_poker.NAME: "649a.2(a)",
    ultimate_texas_holdem.NAME: "653a.2(a)",
    let_it_ride.NAME: "a Let It Ride layout",  # 643a.2 is not in the text carried here
}
GAME_NAMES = tuple(MAX_SEATS)

__all__ = ["GAME_NAMES", "MAX_SEATS", "SEAT_RULES", "GameConfig", "TableGame"]
