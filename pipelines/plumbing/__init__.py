"""Beam plumbing the stages share: its filesystems as our output filesystem (beamfs),
coders that never pickle (coders), counters, runner options (options), the local runner
(runner), groupings through files (shuffle), progress bars (progress) and the skeleton of
every driver (stage)."""
