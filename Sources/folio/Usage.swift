enum Usage {
    static let main = """
        usage: folio [--socket PATH] [--json] [--min-seq N] COMMAND [ARGS]

        Talks to foliod over its Unix socket. Output is a table or text on a terminal; with --json,
        or when stdout is not a terminal, one JSON object per line. With --min-seq N a read waits
        until foliod has applied event N (on a node of a cluster: a write made on another node; on
        a terminal a write on a node of a cluster shows its event).

        Objects
          create COLLECTION FIELD=TEXT FIELD:=JSON ... [--id ID]
          get COLLECTION ID [--at-seq N | --as-of TIME | --include PATHS]
          update COLLECTION ID [FIELD=TEXT FIELD:=JSON ...] [--inc F=N] [--push F=V] [--add-to-set F=V]
                               [--pull F=V] [--set F:=JSON] [--unset F] [--if-version N]
          delete COLLECTION ID [--if-version N]
          batch [--no-atomic] < OPS.jsonl
          history COLLECTION ID [--after SEQ] [--limit N]
          (create, update, delete and batch take --request-key K; without one, a random key is
          sent, so that a write retried after a lost answer is applied once)

        References and schemas
          links COLLECTION ID FIELD [--where JSON] [-w FILTER]... [--sort FIELDS] [paging] [--include PATHS]
          backlinks COLLECTION ID --from COLLECTION.FIELD [--where JSON] [--sort FIELDS] [paging] [--count]
          schema define COLLECTION --fields JSON [--no-additional-fields]
          schema get COLLECTION | schema list | schema drop COLLECTION

        Lists and views
          list COLLECTION [--where JSON] [-w FILTER]... [--sort FIELDS] [--desc]
                          [--limit N] [--offset N | --page N | --after CURSOR] [--explain]
          list --view NAME [--limit N] [--page N | --offset N | --after CURSOR]
          count COLLECTION [--where JSON] [-w FILTER]... | count --view NAME
          view define NAME COLLECTION [--where JSON] [-w FILTER]... [--sort FIELDS] [--unique]
          view list
          view drop NAME

        Files
          file put PATH|- [--name NAME] [--type TYPE] [--replace] [--pieces]
          file get NAME [--pieces]      the content, to stdout
          file info NAME [--limit N]    its metadata and the records that refer to it
          file ls [--prefix P]
          file rm NAME [--force]
          file orphans [--older-than AGE] [--prefix P]
          file prune [--older-than AGE] removes orphans (default: older than 1d)

        The log
          events [--after N] [--limit N]
          watch [--after N] [--collection C]  |  watch COLLECTION|--view V [-w ...] [--sort ...] [--limit N]
          export [--after N] [--with-files]
          verify
          backup DIR

        Server
          stats                         the log's head, collections, connections, map use
          hello                         protocol version, and the caller's uid and role
          metrics                       the daemon's counters, in Prometheus text (admin)
          top [--interval S] [--iterations N]
                                        a live view: requests/s by op, p50/p99, queues, map use

        Run `folio COMMAND --help` for one command. FOLIO_SOCKET overrides the socket path.
        """

    static let commands: [String: String] = [
        "file": """
        usage: folio file put PATH|- [--name NAME] [--type TYPE] [--replace] [--pieces]
               folio file get NAME [--pieces] > OUT
               folio file info NAME [--limit N]
               folio file ls [--prefix P]
               folio file rm NAME [--force]
               folio file orphans [--older-than AGE] [--prefix P]
               folio file prune [--older-than AGE]

        Files stored beside the records, by name (1 to 256 bytes; '/' separates segments, none
        empty or '..'). put stores PATH's content under NAME, or under a name the server makes,
        with the content type TYPE (default application/octet-stream); an existing name needs
        --replace. The same content is stored once, however many names it has. get writes the
        content to stdout; ls lists names, their size, type and SHA-256; rm removes a name.
        Records refer to a file with {"$file": NAME}: info shows a file and up to N (default
        100) of the records that refer to it; rm refuses a name records refer to (a conflict
        naming them) unless --force. orphans lists the names no record refers to, bound more
        than AGE ago (90s, 30m, 12h, 7d, 2w; default 0s: all); prune removes those older than
        AGE (default 1d), one delete each, keeping any a record has come to refer to meanwhile.
        put passes a regular file's descriptor to foliod, which reads it directly; stdin (PATH
        -), or any file with --pieces, goes in base64 pieces of up to 512 KiB, with a progress
        line on a terminal. get receives a read-only descriptor and copies it to stdout; with
        --pieces it reads 512 KiB pieces instead. Files may be up to foliod's --file-max-size.

          folio file put photo.jpg --name reports/2026-12-01.jpg --type image/jpeg
          folio file get reports/2026-12-01.jpg > photo.jpg
          folio create Report photo:='{"$file": "reports/2026-12-01.jpg"}'
          folio file prune --older-than 7d
        """,
        "create": """
        usage: folio create COLLECTION FIELD=TEXT FIELD:=JSON ... [--id ID]

        Creates an object. FIELD=TEXT stores a string; FIELD:=JSON stores any JSON value
        (numbers, true/false, null, arrays, objects, {"$date": ...}, {"$ref": ...}).
        --id gives the object's id instead of letting the server make one.

          folio create Task title="Buy milk" done:=false n:=3
        """,
        "get": """
        usage: folio get COLLECTION ID [--at-seq N | --as-of TIME | --include PATHS]

        Shows an object; --at-seq or --as-of (RFC 3339) shows it as it was then. --include
        author,items.owner puts the objects those references point at in their place.
        """,
        "update": """
        usage: folio update COLLECTION ID [FIELD=TEXT FIELD:=JSON ...] [--inc F=N] [--push F=V]
                            [--add-to-set F=V] [--pull F=V] [--set F:=JSON] [--unset F]
                            [--if-version N] [--request-key K]

        Changes fields: FIELD=... is a JSON Merge Patch (FIELD:=null removes a field); the
        options are field operations applied after it, with no read by the client: --inc adds
        a number, --push appends to an array, --add-to-set appends unless present, --pull
        removes every equal element, --set sets a value (null too), --unset removes. V is TEXT,
        or JSON after ':=' (--push tags=home, --push refs:='{"$ref":"Item/i1"}'). With
        --if-version, the update applies only if the object is still at version N.

          folio update Task t1 --inc n=2 --push tags=home --pull tags=work
        """,
        "batch": """
        usage: folio batch [--no-atomic] [--request-key K] < OPS.jsonl

        Sends the creates, updates and deletes on standard input, one JSON op per line
        ({"op":"create","collection":"Item","data":{...}}), as one batch: all or nothing, unless
        --no-atomic. {"$result": N} in a later op stands for a reference to op N's object, and
        "id": {"$result": N} for its id.
        """,
        "links": """
        usage: folio links COLLECTION ID FIELD [--where JSON] [-w FILTER]... [--sort FIELDS] [--desc]
                           [--limit N] [--offset N | --after CURSOR] [--include PATHS] [--explain]

        The objects FIELD of COLLECTION/ID refers to, in the field's order unless --sort.
        """,
        "backlinks": """
        usage: folio backlinks COLLECTION ID --from COLLECTION.FIELD [--where JSON] [-w FILTER]...
                               [--sort FIELDS] [--limit N] [--offset N | --after CURSOR] [--count]

        The objects whose FIELD refers to COLLECTION/ID, by id unless --sort:
          folio backlinks Item i1 --from Category.items
        """,
        "schema": """
        usage: folio schema define COLLECTION --fields JSON [--no-additional-fields]
               folio schema get COLLECTION | folio schema list | folio schema drop COLLECTION

        A schema types the fields of a collection and sets what deleting a referenced object
        does (onTargetDelete: keep, nullify, cascade, deny; owns: true):
          folio schema define Category --fields '{"title": {"type": "string", "required": true},
            "items": {"type": "array", "items": {"type": "ref", "ref": "Item"}, "owns": true}}'
        """,
        "delete": """
        usage: folio delete COLLECTION ID [--if-version N]
        """,
        "history": """
        usage: folio history COLLECTION ID [--after SEQ] [--limit N]

        Every event of one object, oldest first, also after it was deleted. With --limit, one
        page of at most N events (1000 at most) after event SEQ; its "next" is the SEQ of the
        next page.
        """,
        "list": """
        usage: folio list COLLECTION [--where JSON] [-w FILTER]... [--sort FIELDS] [--desc]
                          [--limit N] [--offset N | --page N | --after CURSOR] [--explain]
               folio list --view NAME [...paging]

        Lists objects, 100 per page by default (at most 1000). --sort takes field paths
        separated by commas, '-' for descending: --sort -createdAt,title. --page N is 1-based.
        -w adds a simple filter (several are combined with and):
          -w done=false   -w 'n>5'  -w 'n<=9'  -w 'title!=x'  -w 'title^=Buy' (prefix)
        A value that is valid JSON is taken as JSON, anything else as text.
        """,
        "count": """
        usage: folio count COLLECTION [--where JSON] [-w FILTER]...
               folio count --view NAME
        """,
        "view": """
        usage: folio view define NAME COLLECTION [--where JSON] [-w FILTER]... [--sort FIELDS] [--unique]
               folio view list
               folio view drop NAME

        A view keeps the objects of a collection that match a filter in sort order, updated with
        every write. --unique makes the sort fields unique among the view's objects.
        """,
        "events": """
        usage: folio events [--after N] [--limit N]

        Events of the log with sequence > N (default 0), at most 100 (or --limit, up to 1000).
        """,
        "watch": """
        usage: folio watch [--after N] [--collection C]
               folio watch COLLECTION [-w COND]... [--where JSON] [--sort F,...] [--desc] [--limit N]
               folio watch --view V [-w COND]... [--limit N]

        The first form prints events as they are committed, from sequence N+1 on (default: new
        events only), until interrupted.

        The others keep a live query: the first N objects (default 100) of the collection or
        view, in the order asked, as -w/--where select them, redrawn in place on a terminal as
        commits change them. With --json (or piped) they print the first page's result, then
        each change line's change as it comes.

        Either form, cut off for lagging or its connection lost, resumes after the last event or
        change shown, trying for 30 s to reach foliod again (a restart) before it ends with exit 1.
        """,
        "export": """
        usage: folio export [--after N] [--with-files] > events.jsonl

        Streams the log, one event per line, for `foliod import`. --with-files adds the content
        of every file.put, in base64 lines of 512 KiB before the event that names it, so that the
        import restores the files too.
        """,
        "verify": """
        usage: folio verify

        Asks foliod to check the hash chain and replay the log against the live state and views.
        Exits 1 if anything differs.
        """,
        "backup": """
        usage: folio backup DIR

        Writes a consistent, compacted copy of the data directory into DIR (created if needed,
        must be empty) while foliod keeps serving, with the content of every file in DIR/blobs
        (hard links where DIR is on the same file system); the copy keeps the live store's modes. DIR
        must lie below foliod's backup-dir (by default backups in its data directory), and
        only an admin may back up. Start foliod with --data DIR to use the copy.
        """,
        "stats": """
        usage: folio stats

        The daemon's state: the log's head, objects per collection, connections, watches,
        writer and map figures. A peer without the admin role sees the head and the
        collections it may read.
        """,
        "hello": """
        usage: folio hello

        The protocol version, the daemon's version, and who foliod takes the caller to be:
        the peer's uid and its role (read, write or admin) in the access policy.
        """,
        "metrics": """
        usage: folio metrics

        The daemon's counters and histograms in Prometheus text format (admin only):
        requests by op and outcome, latency by op, writer batch sizes, commit and sync
        latency, connections, watches and their lag, map use, refusals by cause.
        foliod --metrics-socket PATH serves the same text over HTTP/1.0 for a scraper.
        """,
        "top": """
        usage: folio top [--interval S] [--iterations N]

        A live view of the daemon, from its metrics (admin only), refreshed every S seconds
        (default 1): requests/s and p50/p99 latency by op, connections, commits/s, queue
        depths, map use. Ends after N refreshes, or on Ctrl-C.
        """,
    ]
}
