"""The job hand-off (docs/jobs.md): a preloaded server that forks each
`cqb run` job of a local pipeline run (server), and the job's side of it
(client, and client.c compiled by the package build). Nothing is imported
here: the job side is part of every job's start-up."""
