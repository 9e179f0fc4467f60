"""Versioned schema of the state database.

Each entry upgrades the schema by one version; ``StateStore`` applies the missing ones in a single
transaction at open, so a state file written by an older release keeps working.
"""

from __future__ import annotations

MIGRATIONS: list[str] = [
    # 1: the initial schema
    """
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);
    CREATE TABLE tables (
        table_id TEXT PRIMARY KEY,
        state TEXT NOT NULL,
        chunk_key TEXT,
        schema TEXT,
        generation INTEGER NOT NULL DEFAULT 0,
        splits_total INTEGER,
        splits_done INTEGER NOT NULL DEFAULT 0,
        rows_snapshotted INTEGER NOT NULL DEFAULT 0,
        events_applied INTEGER NOT NULL DEFAULT 0,
        stream_from TEXT,
        paused_at TEXT,
        last_event_ts INTEGER,
        added_at REAL NOT NULL,
        updated_at REAL NOT NULL
    );
    CREATE TABLE splits (
        split_id TEXT PRIMARY KEY,
        table_id TEXT NOT NULL,
        split_no INTEGER NOT NULL,
        generation INTEGER NOT NULL DEFAULT 0,
        chunk_key TEXT NOT NULL,
        range_start TEXT,
        range_end TEXT,
        status TEXT NOT NULL,
        batch_no INTEGER,
        low_watermark TEXT,
        high_watermark TEXT,
        rows INTEGER,
        backfill_events INTEGER,
        started_at REAL,
        finished_at REAL,
        duration_ms INTEGER
    );
    CREATE INDEX splits_by_table ON splits (table_id, split_no);
    CREATE INDEX splits_by_status ON splits (status);
    CREATE TABLE batches (
        batch_no INTEGER PRIMARY KEY,
        plan TEXT NOT NULL,
        status TEXT NOT NULL,
        staged_path TEXT,
        records INTEGER,
        created_at REAL NOT NULL,
        staged_at REAL,
        applied_at REAL
    );
    CREATE TABLE offsets (
        name TEXT PRIMARY KEY,
        offset TEXT NOT NULL,
        updated_at REAL NOT NULL
    );
    CREATE TABLE job_runs (
        run_id INTEGER PRIMARY KEY AUTOINCREMENT,
        pid INTEGER,
        host TEXT,
        master TEXT,
        spark_ui TEXT,
        started_at REAL NOT NULL,
        heartbeat_at REAL,
        ended_at REAL,
        status TEXT NOT NULL,
        exit_code INTEGER,
        error TEXT
    );
    CREATE TABLE lag_samples (
        ts REAL NOT NULL,
        committed TEXT,
        head TEXT,
        bytes_behind INTEGER,
        files_behind INTEGER,
        event_lag_ms INTEGER
    );
    CREATE INDEX lag_by_ts ON lag_samples (ts);
    CREATE TABLE events (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        ts REAL NOT NULL,
        level TEXT NOT NULL,
        kind TEXT NOT NULL,
        table_id TEXT,
        message TEXT NOT NULL
    );
    CREATE TABLE commands (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        kind TEXT NOT NULL,
        target TEXT,
        args TEXT,
        issued_by TEXT,
        issued_at REAL NOT NULL,
        status TEXT NOT NULL,
        reason TEXT,
        applied_at REAL
    );
    """,
    # 2: per-table control: what a paused table resumes to, where a table came from
    # (config or an add-table command) and who removed it, so a restart honours the commands
    """
    ALTER TABLE tables ADD COLUMN resume_state TEXT;
    ALTER TABLE tables ADD COLUMN origin TEXT NOT NULL DEFAULT 'config';
    ALTER TABLE tables ADD COLUMN removed_by TEXT;
    ALTER TABLE tables ADD COLUMN redump_chunk INTEGER;
    CREATE INDEX commands_by_status ON commands (status, id);
    """,
    # 3: the lake's tables as the job last measured them, and their maintenance, so the
    # console and status show files and sizes without opening Delta logs themselves
    """
    CREATE TABLE lake_tables (
        name TEXT NOT NULL,
        kind TEXT NOT NULL,
        path TEXT NOT NULL,
        version INTEGER,
        files INTEGER,
        live_bytes INTEGER,
        disk_bytes INTEGER,
        small_files INTEGER,
        rows INTEGER,
        measured_at REAL,
        optimized_at REAL,
        vacuumed_at REAL,
        last_result TEXT,
        PRIMARY KEY (name, kind)
    );
    """,
    # 4: source outages: one row per component's wait for the source, open while
    # ended_at is NULL, so status and the console can say "reconnecting" instead of "stalled"
    """
    CREATE TABLE outages (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        component TEXT NOT NULL,
        since REAL NOT NULL,
        attempts INTEGER NOT NULL,
        next_try_at REAL NOT NULL,
        last_error TEXT NOT NULL,
        ended_at REAL
    );
    CREATE INDEX outages_open ON outages (ended_at, component);
    """,
    # 5: online schema evolution: a table whose shape changed at a binlog position
    # waits here, its DDL noted, until the planner applies the new shape or parks it
    """
    ALTER TABLE tables ADD COLUMN schema_pending TEXT;
    """,
    # 6: online verification: each chunk's last verdict, where and when it was
    # reached, and the first differing keys, for the console, status and repairs
    """
    CREATE TABLE verifications (
        table_id TEXT NOT NULL,
        split_no INTEGER NOT NULL,
        verified_at REAL NOT NULL,
        position TEXT,
        verdict TEXT NOT NULL,
        rows INTEGER NOT NULL DEFAULT 0,
        missing INTEGER NOT NULL DEFAULT 0,
        extra INTEGER NOT NULL DEFAULT 0,
        differing INTEGER NOT NULL DEFAULT 0,
        detail TEXT,
        PRIMARY KEY (table_id, split_no)
    );
    """,
    # 7: where a run serves its metrics, for status and whoever scrapes it
    """
    ALTER TABLE job_runs ADD COLUMN metrics_url TEXT;
    """,
    # 8: a staged batch the planner may plan past before it is applied (a binlog window whose
    # commit only moves its tables to its end): the driver applies it while the next one is read
    """
    ALTER TABLE batches ADD COLUMN plan_past INTEGER NOT NULL DEFAULT 0;
    """,
    # 9: what the job watches past its start-up checks: changes of a table the binlog did not
    # carry as full rows (counted per cause), and the server's binlog settings as last probed
    """
    CREATE TABLE held_changes (
        table_id TEXT NOT NULL,
        cause TEXT NOT NULL,
        count INTEGER NOT NULL,
        last_at REAL NOT NULL,
        last_position TEXT,
        last_what TEXT NOT NULL,
        PRIMARY KEY (table_id, cause)
    );
    CREATE TABLE source_settings (
        name TEXT PRIMARY KEY,
        value TEXT NOT NULL,
        expected TEXT NOT NULL,
        ok INTEGER NOT NULL,
        checked_at REAL NOT NULL,
        changed_at REAL NOT NULL
    );
    """,
    # 10: where a batch's time went, for the lag split by stage: the planner's own time
    # (asking the server where the binlog ends, splitting tables) and the applier's wait for
    # lake maintenance
    """
    ALTER TABLE batches ADD COLUMN plan_seconds REAL;
    ALTER TABLE batches ADD COLUMN held_seconds REAL;
    """,
    # 11: the sink's commit of a batch, table by table (JSON ``{"db.t": seconds}``), for the
    # commit stage per table
    """
    ALTER TABLE batches ADD COLUMN table_seconds TEXT;
    """,
    # 12: how long the batch's longest task spent reading and decoding (its own code, not
    # Spark's), to split the read stage from Spark's share of the batch
    """
    ALTER TABLE batches ADD COLUMN read_seconds REAL;
    """,
]
