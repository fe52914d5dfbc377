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

    /// `folio_append(snapshot, at, writes)`: decides a node's group of proposed writes, executed at
    /// sequence `snapshot`. `writes` is a JSON array, one element per write in the node's order:
    /// `{"r": [hex key, ...], "w": [hex key, ...], "all": bool, "e": [{"t": type, "a": tail,
    /// "c": cause index, "b": rest}, ...]}` (`ProposedWrite`).
    ///
    /// Under the head row's lock, each write in turn is accepted if none of its read keys changed
    /// after `snapshot` (by an event before this call: those of writes accepted earlier in the call
    /// are what the node executed it after), and for `all`, if nothing at all was appended after it.
    /// Once one write is refused, every later one of the call is too: the node executed it after
    /// the refused one. An accepted write's events are numbered from the head, timed
    /// `greatest(at, the head's time)` so that the log's times never go backwards, composed into
    /// their canonical bytes, chained and inserted; its write keys take its first sequence.
    ///
    /// Returns a first row whose `decided` is `first,first,...;head`: each write's first sequence
    /// (0: refused, the node catches up and executes it again), then the head after the call; then
    /// up to 1,000 events of the log after `snapshot`, which the node applies next. Notifies
    /// `folio_log` with the head.
    static let appendFunction = """
        DROP FUNCTION IF EXISTS folio_append(bigint, text, jsonb);
        CREATE FUNCTION folio_append(p_snapshot bigint, p_at text, p_writes jsonb)
            RETURNS TABLE (decided text, seq bigint, canonical bytea, hash bytea)
        LANGUAGE plpgsql AS $fn$
        DECLARE
            v_head folio_head%ROWTYPE;
            v_count int := jsonb_array_length(p_writes);
            v_accepted int;
            v_index int := 0;
            v_seq bigint;
            v_hash bytea;
            v_at text;
            v_first bigint;
            v_write jsonb;
            v_event jsonb;
            v_canonical bytea;
            v_seqs bigint[] := '{}';
            v_events bytea[] := '{}';
            v_hashes bytea[] := '{}';
            v_results text[] := '{}';
        BEGIN
            SELECT * INTO v_head FROM folio_head WHERE one FOR UPDATE;
            -- One query for every write of the call: the first that read a key changed after its
            -- snapshot, or that read everything while anything was appended after it. Writes
            -- accepted earlier in the call are not in folio_keys yet: what they change, the node
            -- executed the later writes after. `key = ANY(array)` is an index lookup per key.
            SELECT coalesce(min(w.ordinality)::int - 1, v_count) INTO v_accepted
            FROM jsonb_array_elements(p_writes) WITH ORDINALITY AS w
            WHERE (coalesce((w.value->>'all')::boolean, false) AND v_head.seq > p_snapshot)
               OR EXISTS (
                   SELECT 1 FROM folio_keys k
                   WHERE k.key = ANY(ARRAY(SELECT decode(r, 'hex') FROM jsonb_array_elements_text(w.value->'r') AS r))
                     AND k.seq > p_snapshot);
            v_seq := v_head.seq;
            v_hash := v_head.hash;
            v_at := greatest(p_at, v_head.at);
            FOR v_write IN SELECT value FROM jsonb_array_elements(p_writes) LOOP
                EXIT WHEN v_index >= v_accepted;
                v_first := v_seq + 1;
                FOR v_event IN SELECT value FROM jsonb_array_elements(v_write->'e') LOOP
                    v_seq := v_seq + 1;
                    v_canonical := convert_to(
                        '{"seq":' || v_seq || ',"type":"' || (v_event->>'t') || '","at":"' || v_at || '"' || (v_event->>'a')
                            || coalesce((v_first + (v_event->>'c')::bigint)::text || (v_event->>'b'), ''),
                        'UTF8');
                    v_hash := sha256(v_hash || v_canonical);
                    v_seqs := v_seqs || v_seq;
                    v_events := v_events || v_canonical;
                    v_hashes := v_hashes || v_hash;
                END LOOP;
                v_results := v_results || v_first::text;
                v_index := v_index + 1;
            END LOOP;
            FOR v_index IN v_accepted + 1 .. v_count LOOP
                v_results := v_results || '0'::text;
            END LOOP;
            IF v_seq > v_head.seq THEN
                INSERT INTO folio_events (seq, canonical, hash) SELECT * FROM unnest(v_seqs, v_events, v_hashes);
                -- A key changed by several writes of the call takes the last one's first sequence.
                INSERT INTO folio_keys (key, seq)
                    SELECT decode(k, 'hex'), max(v_results[w.ordinality]::bigint)
                    FROM jsonb_array_elements(p_writes) WITH ORDINALITY AS w, jsonb_array_elements_text(w.value->'w') AS k
                    WHERE w.ordinality <= v_accepted
                    GROUP BY k
                    ON CONFLICT (key) DO UPDATE SET seq = EXCLUDED.seq;
                UPDATE folio_head SET seq = v_seq, hash = v_hash, at = v_at WHERE one;
                PERFORM pg_notify('folio_log', v_seq::text);
            END IF;
            RETURN QUERY SELECT array_to_string(v_results, ',') || ';' || v_seq, NULL::bigint, NULL::bytea, NULL::bytea;
            -- The log after the snapshot, which the node applies next: no second query to fetch it.
            RETURN QUERY SELECT NULL::text, e.seq, e.canonical, e.hash FROM folio_events e
                WHERE e.seq > p_snapshot ORDER BY e.seq LIMIT 1000;
        END
        $fn$;
        """
}
