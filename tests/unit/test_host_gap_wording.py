"""Host-gap advice fits the program the trace says it is: "Python between torch calls" only for a
torch.profiler trace; a native CUDA program's Nsight Systems report and an XLA trace get their own."""

from profilectl.analysis.diagnosis import SteadyFigures, steady_finding
from profilectl.analysis.idle import IdleCause, rules
from profilectl.formats import jax_trace, nsys_sqlite, torch_trace
from support import FIXTURES


def test_each_reader_says_what_the_program_is():
    assert {t.program for t in torch_trace.read(FIXTURES / "nvidia-h200" / "torch_profiler_trace.json").timelines} \
        == {"torch"}
    assert {t.program for t in jax_trace.read(FIXTURES / "xla-trace/xprof-mi300x-8gpu/tw003.trace.json.gz").timelines} \
        == {"xla"}
    # PROCESSES names the program: ./lab4_VectorAdd_Streams, a CUDA C++ program
    assert {t.program for t in nsys_sqlite.read_export(FIXTURES / "nsys/vectoradd-streams-2022.4.sqlite").timelines} \
        == {"native"}


def test_unrecorded_host_work_advice_by_program():
    gap = [IdleCause(cause="unrecorded", title="unrecorded host work", idle_ns=900, gaps=3, share=0.9),
           IdleCause(cause="launch", title="launch overhead", idle_ns=100, gaps=9, share=0.1)]

    def advice(program):
        figures = SteadyFigures(scope="whole run", span_ns=10_000, idle_ns=9_000, busy_percent=10.0, exposed_ns=0,
                                exposed_share=0.0, copy_ns=0, copy_share=0.0, causes=tuple(gap), program=program)
        return steady_finding(figures).next_step
    assert "torch.profiler(with_stack=True)" in advice("torch")
    assert "perf record" in advice("native") and "torch" not in advice("native")
    assert "jax.profiler" in advice("xla") and "torch" not in advice("xla")
    assert advice("") == rules().cause("unrecorded").next_step  # unknown: the general advice
