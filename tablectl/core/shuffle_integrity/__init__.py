"""Shuffle integrity: does the table deal decks that are randomly intermixed (649a.5(a),
653a.5(a), 643a.5(a))? Pure statistics on the shoe's card reads, with their null
distributions and the error budget (docs/shuffle-integrity.md)."""
