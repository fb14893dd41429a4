"""The full tier: tests the default run (`python -m pytest -q`) leaves out, each with the default test that covers its path.

pyproject's addopts deselect `-m full`; `python -m pytest -q -m full` runs only these, `-m "full or not full"` all;
CI (.ci/run) runs both tiers. A test lands here when it repeats, end to end (spawned workers, a second CLI
process, a compile), a path a default test already takes, or is one more case of an exhaustive
parametrization; what it adds is a second executor, a second seed, a second dtype. Names are node ids
(a `*` matches within them); conftest marks the matching tests `full` and names, in the summary, an
entry that no longer matches a test of a collected file (a renamed test falls back into the default tier).
"""
from __future__ import annotations

import re

FULL = {
    # ---- compare's gate: the rerun pair both ways stays in the default tier
    "tests/test_compare_gate.py::test_every_ordered_pair_of_the_three_reruns_regresses_nothing[*]":
        "test_compare_gate::test_a_rerun_of_the_quick_grid_regresses_nothing (one pair, both ways)",
    "tests/test_transfer_pooled.py::test_the_report_lists_the_pooled_transfer_cost":
        "the pooled rows and their text: test_transfer_pooled::test_the_transfer_cost_pooled_over_every_ordered_pair",
    # ---- resume and claims: test_resume::test_kill_9_then_resume and the claim tests of test_store_safety
    "tests/test_claims.py::test_a_run_killed_on_another_host_is_resumed_to_completion_on_this_one":
        "a stale claim of another host is taken: test_claims::test_a_claim_of_another_host_lapses_without_its_heartbeat",
    "tests/test_resume.py::test_two_runs_sharing_a_store_measure_each_attempt_once":
        "claims: test_store_safety (claims keep two runs apart; a run beside a claimed attempt)",
    "tests/test_multi_device.py::test_an_interrupt_kills_a_busy_device_and_resume_completes_the_plan":
        "resume: test_resume kill -9; interrupt of a lane: test_multi_device interrupt-then-resume (in process)",
    "tests/test_multi_device.py::test_two_cpu_devices_replicate":
        "replicate planning: test_replicate_runs_every_attempt_once_per_device; spawned lanes: the shard test",
    # ---- Ray: test_two_actors_run_a_grid_with_the_local_executors_statuses stays in the default tier
    "tests/test_ray_executor.py::test_a_killed_driver_resumes_to_one_row_per_attempt":
        "resume: test_resume kill -9 (the local executor); Ray placement: the two-actors test",
    "tests/test_ray_executor.py::test_an_actor_killed_mid_attempt_has_its_attempts_run_again[*]":
        "a lost lane's attempts put back: test_multi_device interrupt-then-resume (in process)",
    # ---- compiler caches and environment of the workers
    "tests/test_shared_cache.py::test_concurrent_runs_with_compilers_store_no_error_a_solo_run_has_not[*]":
        "the lease and the retry on their own: the other tests of test_shared_cache (a run ending beside a live one "
        "keeps the cache; a vanished cache's attempt runs again)",
    "tests/test_runner_fakes.py::test_a_later_repeat_loads_what_jax_compiled_in_an_earlier_one":
        "the run's cache reaches the workers: test_compile_workers_use_the_runs_own_compiler_cache",
    "tests/test_runner_fakes.py::test_compile_workers_use_the_runs_own_compiler_cache[True-None]":
        "a named cache: test_cli's compiler-cache test and the [False-None] case",
    "tests/test_runner_fakes.py::test_compile_workers_use_the_runs_own_compiler_cache[False-cpu:0,cpu:1]":
        "the [False-None] case (one device)",
    "tests/test_runner_fakes.py::test_compiler_workers_compile_in_process_unless_the_user_says_otherwise[3-3]":
        "the [None-1] case (the same path, the default value)",
    # ---- one more sweep of what the module's fake sweep and in-process attempts cover
    "tests/test_runner_fakes.py::test_sweep_mutating_backend_does_not_poison_the_next":
        "test_correct_backends_sharing_a_worker_after_a_mutating_one_stay_ok (in process) and the fake sweep",
    "tests/test_runner_fakes.py::test_a_bug_in_one_head_of_eight_is_caught_whatever_slices_the_seed_picks[*-[2345]]":
        "seeds 0 and 1 of both modes",
    "tests/test_cli.py::test_run_and_show_through_the_installed_command":
        "the installed command: test_bad_input_from_the_installed_command, test_help_from_the_installed_command; "
        "run then show: the in-process CLI tests",
    "tests/test_startup.py::test_run_as_a_program_counts_its_start_up_from_the_process_start":
        "the start-up ledger: test_run_called_from_python_counts_from_the_call; a process's age: "
        "test_a_processs_age_is_read_from_proc",
    # ---- model steps: test_command_runs_stores_and_resumes stays in the default tier
    "tests/test_model.py::test_tiny_model_agrees_with_float64_compiled[*-bf16-*]":
        "the fp32 cases of the compiled backends and the bf16 cases of the eager ones",
    "tests/test_model.py::test_a_hang_is_timeout_a_dead_worker_crash_and_the_run_goes_on_and_resumes":
        "the workers' timeout, crash and resume: the fake sweep and test_resume; model steps through the "
        "workers: test_command_runs_stores_and_resumes",
    "tests/test_model_jobs.py::test_model_steps_run_through_the_ray_executor":
        "model steps on pooled lanes: test_model_steps_run_through_the_multi_device_executor; Ray: the two-actors test",
    "tests/test_model.py::test_prediction_from_a_kernel_store":
        "the prediction's arithmetic: test_amdahl_arithmetic, test_compare_and_kernel_lookup",
    "tests/test_model_rows_io.py::test_rows_of_a_real_model_run_round_trip_and_reach_the_report":
        "the model rows' export, import and page: the other tests of test_model_rows_io and test_html_report",
    # ---- report --by: the page's sides are tested on the page itself
    "tests/test_scale.py::test_report_by_device_name_end_to_end":
        "test_scale::test_the_portability_page_compares_the_sides_of_by (the page and --by's parsing)",
    "tests/test_scale_store.py::test_a_report_draws_each_figure_once_as_svg_and_no_pdf_unless_asked":
        "FigureFiles with and without PDF: test_html_report's sites, built with --pdf, link and hold every PDF",
    # ---- counters (issue 39): run --counters end to end (spawned workers); the step and the sink stay default
    "tests/test_counters.py::test_run_with_fake_counters_through_the_real_runner":
        "test_counters::test_the_counters_step_and_the_sink_make_the_counters_row",
    "tests/test_counters.py::test_run_with_unreadable_counters_keeps_the_attempt_ok":
        "test_counters::test_unreadable_counters_say_why_and_hold_no_number",
    # ---- referee (issue 42.3): the comparison of a store's rows stays in the default tier
    "tests/test_referee.py::test_end_to_end_on_cpu_through_the_runner":
        "test_referee::test_verdicts_from_a_store_of_known_rows (the same comparison, fed a store of known rows)",
    # ---- selftest (issue 42.1): the verdicts, the exit code and one class in process stay in the default tier
    "tests/test_selftest.py::test_a_class_no_gate_catches_is_missed_and_the_command_fails":
        "test_selftest::test_one_class_and_a_planted_one_in_process (the same kernels and judge, without workers)",
    "tests/test_selftest.py::test_the_cpu_subset_through_the_real_command":
        "test_selftest::test_one_class_and_a_planted_one_in_process",
    "tests/test_selftest.py::test_silently_eager_is_caught_every_time_and_compiled_flex_stays_ok_on_cpu":
        "test_selftest::test_silently_eager_is_caught_on_cpu_because_no_inductor_ran (one attempt of the class)",
    # ---- the triton ladder (issue 41): one child under the interpreter for the other rungs, variants, dtypes, layouts
    "tests/test_triton_ladder.py::test_every_rung_passes_every_gate[*]":
        "test_triton_ladder's default rows: fa2 forward+backward (bottom-right causal, GQA) and paged split-KV decode",
    "tests/test_triton_ladder.py::test_attend_serves_a_models_forward_and_backward":
        "the same forward and backward kernels through the runner: test_triton_ladder's default rows",
    "tests/test_triton_ladder.py::test_the_ladder_section_and_page_show_each_rung_beside_sdpa_flash":
        "the section reads rows as every section does (test_sections); the rows themselves: test_triton_ladder's default rows",
    "tests/test_fp8_tma.py::test_the_tma_kernel_gives_the_pointer_kernels_output[*]":
        "triton-fp8's v2 against v1 in one interpreter child (~12 s); default: test_fp8_tma's candidate table",
    "tests/test_fp8_tma.py::test_the_codes_path_chooses_the_tma_kernel_and_stays_accurate":
        "the same child; default: test_fp8_tma::test_candidates_offer_v2_first_and_keep_v1_as_a_floor",
    # ---- issue 42.4: two spawned CPU runs (1-2 min on a loaded 2-core host)
    "tests/test_repro.py::test_the_printed_command_remeasures_the_same_workload_key":
        "the YAML block names the row's workload key: test_repro::test_the_yaml_block_names_exactly_the_rows_workload",
    # ---- fp8 (issue 40): OK attempts of the tiled float8 fake reach timing (7-20 s on a loaded host); the caught
    # fakes and the contract's scores stay in the default tier
    "tests/test_fp8_contract.py::test_a_correct_tiled_fp8_kernel_is_ok_within_the_contract[129]":
        "test_fp8_contract::test_a_correct_tiled_fp8_kernel_is_ok_within_the_contract[128]",
    "tests/test_fp8_contract.py::test_misbehaving_fp8_kernels_are_caught[fake-fp8-tile-collapse-255-OK-None]":
        "the tile-collapse fake at 256 (INCORRECT) and the correct kernel at 128 (OK)",
    # Table 3 at the paper's KV length (N 8192, float64 on CPU: 1-2 min)
    "tests/test_fp8_contract.py::test_table3_every_row_is_the_papers_at_its_kv_length":
        "test_fp8_contract's Table 3 rows at N 512 (four ratios, the direction of incoherent processing)",
    # ---- issue 42.2's same-values gate: the runner with real sleeps of 0-20 ms (20-40 s on a loaded host)
    "tests/test_repeat_gate.py::test_the_honest_control_through_the_runner_many_times_under_delays":
        "test_repeat_gate::test_the_honest_control_through_the_runner_with_real_delays_is_ok (one attempt) and the "
        "simulated loads",
    "tests/test_repeat_gate.py::test_the_cache_fakes_through_the_runner_under_delays_are_caught[*]":
        "test_fresh_inputs::test_input_caches_caught_with_fresh_inputs (the same fakes without delays)",
}


def _pattern(entry: str) -> re.Pattern:
    parts = re.split(r"(\*|\[2345\])", entry)
    return re.compile("".join(".*" if p == "*" else "[2345]" if p == "[2345]" else re.escape(p) for p in parts))


PATTERNS = {entry: _pattern(entry) for entry in FULL}


def full_entry(nodeid: str) -> str | None:
    """The FULL entry that names this test (or its parametrization), None when it is in the default tier."""
    base = nodeid.split("[", 1)[0]
    for entry, pattern in PATTERNS.items():
        if pattern.fullmatch(nodeid) or entry == base:
            return entry
    return None
