-- A timer row either fires its extension's timer hook ('hook') or delivers a prompt
-- an Agent-scope transaction admitted into a named Session ('admission'); both are
-- claimed by one transaction per firing.
ALTER TABLE timers ADD COLUMN kind TEXT NOT NULL DEFAULT 'hook';
