"""What the workflow changes in Snakemake's jobs, and why (the scheduling
loop's patches and their shared checks: :mod:`cqb.snakemake_patches.scheduling`).

Every started job's shell command is formatted four times (three times by
the log lines of its start, once for its metadata record), each a copy of
the Snakefile's globals and a pass over the job's params and resources; and
every param, input and resource function of a job has its signature read by
``inspect.signature`` again. With ~23,000 jobs these were about a sixth of
Snakemake's own CPU in a py-spy profile. :func:`memoize_shell_commands`
(config ``execution.memoize_shell_commands``) keeps a job's formatted command
while the params and resources it was formatted from are the job's (Snakemake
drops both when it resets them, and the command is formatted again);
:func:`memoize_signatures` (config ``execution.memoize_signatures``) keeps a
function's parameters on the function, as Snakemake's own
``overwrite_function_params`` does.

A job's prepare tests each of its input files for a pipe or service input
by a pass over its dependencies until one holds the file: quadratic in the
inputs, seconds of Snakemake's main thread for an aggregation of thousands
of run files. :func:`index_input_producers` (config
``execution.index_input_producers``) maps each input file to the dependency
that makes it once per prepare, and answers each test from the map.

Each patch checks, as those of :mod:`cqb.snakemake_patches.scheduling` do, that it
replaces what it was written for; a command or signature the memo does not
hold, and a test outside a prepare, are the original's."""

from __future__ import annotations

import inspect
import sys

from .scheduling import PatchedProperty, code_names, getter_reads, install, patch_state, snakemake_class

PIPE_INPUT = "is_pipe_or_service_input"
PREPARE = "prepare"
# What the original reads (snakemake 9): the first dependency whose files hold the path decides
_PIPE_INPUT_NAMES = {"dag", "dependencies", "items", "pipe_or_service_output"}
_PIPE_MEMO = "_cqb_input_producers"


def indexable(job_class) -> bool:
    """Whether ``job_class`` has the pipe-input test and the prepare the index was written for."""
    test = getattr(job_class, PIPE_INPUT, None)
    prepare = getattr(job_class, PREPARE, None)
    if getattr(test, "__code__", None) is None or not inspect.iscoroutinefunction(prepare):
        return False
    return (list(inspect.signature(test).parameters) == ["self", "path"] and code_names(test.__code__) == _PIPE_INPUT_NAMES
            and PIPE_INPUT in code_names(prepare.__code__))


def index_input_producers(job_class=None) -> bool:
    """Make ``job_class.prepare`` (Snakemake's ``Job`` by default) answer its
    pipe-or-service test of each input from one map of the job's input files
    to the dependency that makes each, built on the first test of the
    prepare, instead of a pass over the dependencies per input file
    (quadratic in a job's inputs: thousands for an aggregation). Outside
    ``prepare`` the test is the original's. False, changing nothing, when the
    class is not the one the index was written for."""
    job_class = snakemake_class(job_class, "snakemake.jobs", "Job")
    test, done = patch_state(job_class, PIPE_INPUT, "indexed", lambda _: indexable(job_class))
    if done is not None:
        return done
    prepare = inspect.getattr_static(job_class, PREPARE)

    def is_pipe_or_service_input(self, path) -> bool:
        if _PIPE_MEMO not in self.__dict__:
            return test(self, path)
        producers = self.__dict__[_PIPE_MEMO]
        if producers is None:  # the first test of this prepare: the DAG does not change during it
            producers = {}
            for dep, files in self.dag.dependencies[self].items():
                for name in files:
                    producers.setdefault(name, dep)  # the first dependency holding the path, as the original
            self.__dict__[_PIPE_MEMO] = producers
        dep = producers.get(path)
        return dep is not None and path in dep.pipe_or_service_output

    async def indexed_prepare(self):
        self.__dict__[_PIPE_MEMO] = None
        try:
            return await prepare(self)
        finally:
            self.__dict__.pop(_PIPE_MEMO, None)

    install(job_class, PIPE_INPUT, is_pipe_or_service_input, test, "indexed")
    return install(job_class, PREPARE, indexed_prepare, prepare, "indexed")


SHELL_COMMAND = "shellcmd"
# What the original reads (snakemake 9): the rule's command, formatted by format_wildcards
_SHELL_COMMAND_NAMES = {"format_wildcards", "rule", "shellcmd", "AttributeError", "KeyError", "RuleException",
                        "format", "str"}
# What resetting a job's params and resources drops (snakemake 9): the memo's key is those two
_RESET_NAMES = {"_params", "_resources", "_params_and_resources_resetted"}
_MEMO = "_cqb_shell_command"


def memoizable(job_class) -> bool:
    """Whether ``job_class`` has the shell-command property the memo was written
    for, and a reset that drops exactly the params and resources it keys on."""
    reset = getattr(getattr(job_class, "reset_params_and_resources", None), "__code__", None)
    return (getter_reads(inspect.getattr_static(job_class, SHELL_COMMAND, None), _SHELL_COMMAND_NAMES)
            and reset is not None and code_names(reset) == _RESET_NAMES)


def memoize_shell_commands(job_class=None) -> bool:
    """Make ``job_class.shellcmd`` (Snakemake's ``Job`` by default) return the
    command it formatted last while the job's params, resources and id are the
    objects it was formatted from. False, changing nothing, when the class has
    no such property or not the one the memo was written for."""
    job_class = snakemake_class(job_class, "snakemake.jobs", "Job")
    original, done = patch_state(job_class, SHELL_COMMAND, "memoized", lambda _: memoizable(job_class))
    if done is not None:
        return done
    getter = original.fget

    def shell_command(self):
        memo = self.__dict__.get(_MEMO)
        if memo is not None and memo[0] is self._params and memo[1] is self._resources and \
                memo[2] == self.jobid and memo[0] is not None:
            return memo[3]
        command = getter(self)  # sets the params and resources it formats from
        self.__dict__[_MEMO] = (self._params, self._resources, self.jobid, command)
        return command

    return install(job_class, SHELL_COMMAND, PatchedProperty(shell_command, doc=original.__doc__), original,
                   "memoized")


SIGNATURE = "get_function_params"
# What the original reads (snakemake 9): an overwritten parameter list, else inspect.signature's
_SIGNATURE_NAMES = {"hasattr", "getattr", "FUNC_OVERWRITE_PARAMS_ATTR", "inspect", "signature", "parameters"}
_KEPT = "__cqb_parameters__"


def memoize_signatures(modules=None) -> bool:
    """Make ``get_function_params`` of ``snakemake.common`` (and of the modules
    that imported it: ``modules``, by default every loaded ``snakemake.*``)
    keep a function's parameters on the function once read. False, changing
    nothing, when the function is not the one the memo was written for."""
    try:
        import snakemake.common as common
    except ImportError:
        return False
    original = getattr(common, SIGNATURE, None)
    if getattr(original, "memoized", False):
        return True
    code = getattr(original, "__code__", None)
    if code is None or list(inspect.signature(original).parameters) != ["func"] or \
            code_names(code) != _SIGNATURE_NAMES:
        return False

    overwritten = getattr(common, "FUNC_OVERWRITE_PARAMS_ATTR", None)

    def function_params(func):
        kept = getattr(func, _KEPT, None)
        if kept is not None and not (overwritten and hasattr(func, overwritten)):  # an overwrite wins, as before
            return kept
        params = original(func)
        try:
            setattr(func, _KEPT, params)
        except (AttributeError, TypeError):  # a builtin, a method, a slotted callable: read each time
            pass
        return params

    function_params.memoized = True
    function_params.original = original
    if modules is None:
        modules = [module for name, module in list(sys.modules.items())
                   if name.startswith("snakemake") and getattr(module, SIGNATURE, None) is original]
    for module in {common, *modules}:
        setattr(module, SIGNATURE, function_params)
    return True
