"""The jobs of a local pipeline run (docs/jobs.md): ``run_command`` (`cqb run`,
the command every `simulate` job runs), a preloaded server that forks each
such job (server, with its request checks in admission and its forked
workers in worker), and the job's side of it (client, and client.c compiled
by the package build). Nothing is imported here: the job side is part of
every job's start-up."""
