"""Errors a user can cause. The CLI turns them into one 'pymap: error:' line."""


class PymapError(Exception):
    """Base class; exit_code 1 for data errors."""
    exit_code = 1


class UsageError(PymapError):
    """Bad option values (exit 2)."""
    exit_code = 2


class InputError(PymapError):
    """Malformed or unreadable FASTA/FASTQ/pair input."""


class IndexNotOnDisk(InputError):
    """Worker processes need the index saved, and it could not be (pymap.chunks.client_load).
    reference: the reference the client had loaded by then (None if not), for a run that maps in
    the client instead."""

    def __init__(self, message, reference=None):
        super().__init__(message)
        self.reference = reference


class OutputError(PymapError):
    """The output could not be written (the disk full, a device that refuses it)."""


class IndexMismatch(PymapError):
    """The index was built from another reference or with another format version."""


class IndexCorrupt(PymapError):
    """The index file is truncated or damaged."""


class PluginContractError(PymapError):
    """A plugin returned something its contract forbids (a bug in the plugin, reported as such)."""
    exit_code = 3


class WorkerLost(PymapError):
    """A worker process ended before its chunks were mapped (killed by a signal, out of memory)."""


class PluginError(ValueError):
    """Unknown plugin or bad plugin option (a usage error)."""
