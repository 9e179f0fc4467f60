"""What the console polls, in worker threads: state, server, processes; no Textual here."""
