"""The driver conformance kit: hostile scenarios any shuffler driver and its simulator must
pass with the table behaving as it should (docs/drivers.md, "The conformance kit")."""
