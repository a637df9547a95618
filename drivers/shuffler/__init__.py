"""Card shufflers: what the core needs of one (base), and one module per protocol."""
