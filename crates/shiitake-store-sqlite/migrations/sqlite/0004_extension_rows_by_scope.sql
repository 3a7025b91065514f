-- An owner loads the rows of its Session (every extension) when it starts: index
-- them by scope id so that load reads only its own rows.
CREATE INDEX extension_rows_by_scope ON extension_rows (scope_id, extension_id);
