/// The tables and the append function that cluster nodes share in PostgreSQL (docs/CLUSTER.md).
///
/// - `folio_head`: one row, the last event's sequence, chain hash and time. The append function
///   locks it, so appends are serialized and sequences are gap-free and visible in commit order.
/// - `folio_events`: the log, each event's canonical bytes and chain hash, as a node's LMDB log holds them.
/// - `folio_keys`: for every key of state a write changed (an object, a unique claim, a request
///   key, ...: `ConflictKey`), the sequence of the last event that changed it. This is the
///   minimum state to check a proposal: its read keys must not have changed since its sequence.
public enum ClusterSchema {
    /// Bumped when the tables or the function change shape; a node refuses a log of another version.
    public static let version = 1

    /// Creates what is missing, in one transaction under an advisory lock, so that nodes starting
    /// together do it once. The function is replaced every time, the tables never.
    static let script = """
        BEGIN;
        SELECT pg_advisory_xact_lock(7046105);
        CREATE TABLE IF NOT EXISTS folio_meta (
            one boolean PRIMARY KEY DEFAULT true CHECK (one),
            version int NOT NULL
        );
        INSERT INTO folio_meta VALUES (true, \(version)) ON CONFLICT DO NOTHING;
        CREATE TABLE IF NOT EXISTS folio_head (
            one boolean PRIMARY KEY DEFAULT true CHECK (one),
            seq bigint NOT NULL,
            hash bytea NOT NULL,
            at text NOT NULL
        );
        INSERT INTO folio_head VALUES (true, 0, decode(repeat('00', 32), 'hex'), '') ON CONFLICT DO NOTHING;
        CREATE TABLE IF NOT EXISTS folio_events (
            seq bigint PRIMARY KEY,
            canonical bytea NOT NULL,
            hash bytea NOT NULL
        );
        CREATE TABLE IF NOT EXISTS folio_keys (
            key bytea PRIMARY KEY,
            seq bigint NOT NULL
        );
        \(appendFunction)
        COMMIT;
        """

    /// `folio_append(snapshot, at, ...)`: decides a node's group of proposed writes, executed at
    /// sequence `snapshot` (`ProposedWrite`), given as arrays (binary parameters: nothing to parse).
    /// Writes are numbered from 1 in the node's order:
    /// - `p_all[w]`: write w read everything;
    /// - `p_reads` / `p_read_owner`: each key a write read, and which write;
    /// - `p_keys` / `p_key_owner`: each key a write changes, and which write;
    /// - `p_event_owner`, `p_type`, `p_tail`, `p_cause`, `p_rest`: each event in order, its write,
    ///   type, canonical bytes after the head up to its cause's number, the cause as an index within
    ///   its write (NULL: none) and the bytes after the number.
    ///
    /// Under the head row's lock, the writes are accepted up to the first whose read keys include one
    /// changed after `snapshot` (each looked up by index), or that read everything while anything
    /// was appended after it; that one and every later one are refused: the node executed them after
    /// it. (Writes accepted earlier in the call are not in folio_keys yet: what they change, the node
    /// executed the later writes after.) An accepted write's events are numbered from the head, timed
    /// `greatest(at, the head's time)` so that the log's times never go backwards, composed into
    /// their canonical bytes, chained and inserted; its changed keys take its first sequence.
    ///
    /// Returns a first row whose `decided` is `first,first,...;head`: each write's first sequence
    /// (0: refused, the node catches up and executes it again), then the head after the call; then
    /// up to 1,000 events of the log after `snapshot`, which the node applies next. Notifies
    /// `folio_log` with the head.
    static let appendFunction = """
        DROP FUNCTION IF EXISTS folio_append(bigint, text, jsonb);
        CREATE OR REPLACE FUNCTION folio_append(
            p_snapshot bigint, p_at text, p_all boolean[], p_reads bytea[], p_read_owner int[], p_keys bytea[], p_key_owner int[],
            p_event_owner int[], p_type text[], p_tail text[], p_cause int[], p_rest text[])
            RETURNS TABLE (decided text, seq bigint, canonical bytea, hash bytea)
        LANGUAGE plpgsql AS $fn$
        DECLARE
            v_head folio_head%ROWTYPE;
            v_count int := coalesce(array_length(p_all, 1), 0);
            v_accepted int;
            v_seq bigint;
            v_hash bytea;
            v_at text;
            v_write int := 0;
            v_first bigint;
            v_event record;
            v_canonical bytea;
            v_firsts bigint[] := array_fill(0::bigint, ARRAY[greatest(v_count, 1)]);
            v_lasts bigint[] := array_fill(0::bigint, ARRAY[greatest(v_count, 1)]);
            v_seqs bigint[] := '{}';
            v_events bytea[] := '{}';
            v_hashes bytea[] := '{}';
        BEGIN
            SELECT * INTO v_head FROM folio_head WHERE one FOR UPDATE;
            -- A node that applied events the log does not hold (PostgreSQL lost commits) must stop,
            -- not have writes it executed on them accepted.
            IF p_snapshot > v_head.seq THEN
                RAISE EXCEPTION 'a node proposed writes executed after event %, but the log ends at event %',
                    p_snapshot, v_head.seq USING ERRCODE = 'FOL01';
            END IF;
            -- A scalar subquery per key read: always an index lookup, whatever the table's size.
            SELECT coalesce(min(stale), v_count + 1) - 1 INTO v_accepted FROM (
                SELECT w AS stale FROM generate_subscripts(p_all, 1) AS w WHERE p_all[w] AND v_head.seq > p_snapshot
                UNION ALL
                SELECT r.owner FROM unnest(p_reads, p_read_owner) AS r(key, owner)
                    WHERE (SELECT k.seq FROM folio_keys k WHERE k.key = r.key) > p_snapshot
            ) AS refused;
            v_seq := v_head.seq;
            v_hash := v_head.hash;
            v_at := greatest(p_at, v_head.at);
            FOR v_event IN SELECT * FROM unnest(p_event_owner, p_type, p_tail, p_cause, p_rest) AS e(owner, type, tail, cause, rest) LOOP
                EXIT WHEN v_event.owner > v_accepted;
                IF v_event.owner <> v_write THEN
                    v_write := v_event.owner;
                    v_first := v_seq + 1;
                    v_firsts[v_write] := v_first;
                END IF;
                v_seq := v_seq + 1;
                v_lasts[v_write] := v_seq;
                v_canonical := convert_to(
                    '{"seq":' || v_seq || ',"type":"' || v_event.type || '","at":"' || v_at || '"' || v_event.tail
                        || coalesce((v_first + v_event.cause)::text || v_event.rest, ''),
                    'UTF8');
                v_hash := sha256(v_hash || v_canonical);
                v_seqs := v_seqs || v_seq;
                v_events := v_events || v_canonical;
                v_hashes := v_hashes || v_hash;
            END LOOP;
            IF v_seq > v_head.seq THEN
                INSERT INTO folio_events (seq, canonical, hash) SELECT * FROM unnest(v_seqs, v_events, v_hashes);
                -- A key takes the last sequence of the (last) write that changed it: a node whose copy
                -- ends inside that write (its catch-up stops every 1,000 events) has not seen it all.
                INSERT INTO folio_keys (key, seq)
                    SELECT c.key, max(v_lasts[c.owner]) FROM unnest(p_keys, p_key_owner) AS c(key, owner)
                    WHERE c.owner <= v_accepted
                    GROUP BY c.key
                    ON CONFLICT (key) DO UPDATE SET seq = EXCLUDED.seq;
                UPDATE folio_head SET seq = v_seq, hash = v_hash, at = v_at WHERE one;
                PERFORM pg_notify('folio_log', v_seq::text);
            END IF;
            RETURN QUERY SELECT array_to_string(v_firsts[1:v_count], ',') || ';' || v_seq, NULL::bigint, NULL::bytea, NULL::bytea;
            -- The log after the snapshot, which the node applies next: no second query to fetch it.
            RETURN QUERY SELECT NULL::text, e.seq, e.canonical, e.hash FROM folio_events e
                WHERE e.seq > p_snapshot ORDER BY e.seq LIMIT 1000;
        END
        $fn$;
        """
}
