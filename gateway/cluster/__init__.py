"""What a gateway does differently when it is one of several sharing PostgreSQL
(issue 18): relearn a shard's detectors when it takes the shard over, and queue the
state writes durably while PostgreSQL is away. Composition helpers: they join the
stages (store, rules) and the state, so only the runtime imports them."""
