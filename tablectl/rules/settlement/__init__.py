"""Settlement of a round for each game, in the regulations' order. Pure.

`common` holds what the games share (results, the settlement order, payout arithmetic, the
payout limit); `tcp`, `uth` and `lir` settle Three Card Poker (649a.11), Ultimate Texas
Hold 'Em (653a.11) and Let It Ride (643a.11).
"""

from tablectl.rules.settlement.common import (
    MissingPaytable,
    Outcome,
    Settlement,
    SettlementRefused,
    WagerResult,
)
from tablectl.rules.settlement.lir import (
    LIR_LIMITED_WAGERS,
    LirRules,
    LirSeat,
    lir_minimum_payout_limit_cents,
    settle_let_it_ride,
)
from tablectl.rules.settlement.tcp import (
    TcpRules,
    TcpSeat,
    check_tcp_wagers,
    settle_three_card_poker,
)
from tablectl.rules.settlement.uth import (
    UTH_LIMITED_WAGERS,
    UthRules,
    UthSeat,
    settle_ultimate_texas_holdem,
    uth_minimum_payout_limit_cents,
)

__all__ = [
    "LIR_LIMITED_WAGERS",
    "UTH_LIMITED_WAGERS",
    "LirRules",
    "LirSeat",
    "MissingPaytable",
    "Outcome",
    "Settlement",
    "SettlementRefused",
    "TcpRules",
    "TcpSeat",
    "UthRules",
    "UthSeat",
    "WagerResult",
    "check_tcp_wagers",
    "lir_minimum_payout_limit_cents",
    "settle_let_it_ride",
    "settle_three_card_poker",
    "settle_ultimate_texas_holdem",
    "uth_minimum_payout_limit_cents",
]
