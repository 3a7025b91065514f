-- Messages are stored packed, as the SQLite store keeps them
-- (shiitake-core's store/packed.rs): zstd against a versioned dictionary, or plain
-- JSON, told apart by the first byte. Rows written before are JSON and stay readable.
ALTER TABLE entries ALTER COLUMN message TYPE BYTEA USING convert_to(message, 'UTF8');
