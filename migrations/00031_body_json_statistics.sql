-- +goose Up

-- A search of the deliveries by body path = value (docs/admin.md#search)
-- is `body_json @> …` ordered by id, newest first. PostgreSQL estimates
-- how many rows a containment matches by trying it on the column's
-- sampled histogram; at the default 100 entries a value that matches none
-- of them (a transaction id, a payment intent's id) was estimated at
-- about 600 rows in a million deliveries, so the planner walked the
-- primary key backwards filtering every row — 0.25–3 s to find a value
-- that ten deliveries hold — instead of asking the GIN index (0.2 ms).
-- With 1,000 entries such a value is estimated at a handful of rows and
-- goes through the index, while a value most bodies hold (a status) is
-- still read newest first along the primary key. The cost is ANALYZE's:
-- it samples 300,000 rows of the table instead of 30,000. The ANALYZE
-- here takes the new sample now (a few seconds on a million deliveries)
-- rather than at autovacuum's next visit.
ALTER TABLE callback_deliveries ALTER COLUMN body_json SET STATISTICS 1000;
ANALYZE callback_deliveries (body_json);

-- +goose Down
ALTER TABLE callback_deliveries ALTER COLUMN body_json SET STATISTICS -1;
