-- A consumer's dead letter can always be written: the record's
-- header list is kept as bytes, as its key and value already were, so a NUL
-- or invalid UTF-8 in a header no longer makes PostgreSQL refuse the row
-- (jsonb refuses \u0000, text refuses invalid UTF-8). The readable columns
-- (headers, error) stay, written with those bytes escaped as \xNN.

-- +goose Up
ALTER TABLE consumer.dead_letters
	-- Every header as it came, in order, repeats included: header_keys[i]
	-- and header_values[i] are one header (a NULL value is a null header).
	-- NULL for a minimal dead letter.
	ADD COLUMN header_keys bytea[],
	ADD COLUMN header_values bytea[],
	-- The SQLSTATE (class 22) with which the whole row was refused: this row
	-- is then a minimal dead letter, holding only where the record is.
	ADD COLUMN refused_sqlstate text,
	ADD CONSTRAINT dead_letters_header_pairs
		CHECK ((header_keys IS NULL) = (header_values IS NULL)
			AND cardinality(header_keys) = cardinality(header_values));

-- Rows written before: their headers are only known as the jsonb kept then.
UPDATE consumer.dead_letters SET
	header_keys = ARRAY(SELECT convert_to(key, 'UTF8') FROM jsonb_each_text(headers) ORDER BY key),
	header_values = ARRAY(SELECT convert_to(value, 'UTF8') FROM jsonb_each_text(headers) ORDER BY key);

-- +goose Down
ALTER TABLE consumer.dead_letters
	DROP CONSTRAINT dead_letters_header_pairs,
	DROP COLUMN refused_sqlstate,
	DROP COLUMN header_values,
	DROP COLUMN header_keys;
