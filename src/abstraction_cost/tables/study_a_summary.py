"""Study A tables computed from the measured training table (rule summarise_training), for the report.

Rows aggregate repeats, so their run_id lists the run_ids of every job aggregated, comma-separated and sorted.
"""
import polars as pl

SCHEMAS = {
    # Study A Fig. 4/7/15: eval accuracy over repeats against time = (epoch + 1) × mean training-epoch time.
    # One row per (backend, dataset, init, epoch); only ok rows count.
    "training_curve": {
        "backend": pl.String,
        "dataset": pl.String,
        "init": pl.String,
        "epoch": pl.Int64,                  # 0-based, as in the training table: accuracy after epoch + 1 epochs
        "repeats": pl.Int64,                # repeats with an ok eval row at this epoch
        "epoch_time_s_mean": pl.Float64,    # training phase's timed steps, mean over every epoch and repeat
        "time_s": pl.Float64,               # (epoch + 1) × epoch_time_s_mean
        "accuracy_mean": pl.Float64,
        "accuracy_min": pl.Float64,
        "accuracy_max": pl.Float64,
        "loss_mean": pl.Float64,
    },
    # One row per (backend, dataset, init): the last epoch's eval accuracy, speed, memory and GPU use.
    "training_summary": {
        "backend": pl.String,
        "dataset": pl.String,
        "init": pl.String,
        "repeats_ok": pl.Int64,             # repeats with ok rows
        # repeats with a row of each other status (listed in the report), never counted as one another:
        "repeats_not_run": pl.Int64,        # not_run (the config asks for what this machine lacks)
        "repeats_missing": pl.Int64,        # missing (the dataset could not be obtained)
        "repeats_failed": pl.Int64,         # error, oom, wrong_output (run, and failed)
        "epochs": pl.Int64,                 # last epoch + 1 among ok eval rows
        "final_accuracy_mean": pl.Float64,  # eval accuracy after the last epoch, over repeats
        "final_accuracy_min": pl.Float64,
        "final_accuracy_max": pl.Float64,
        "final_loss_mean": pl.Float64,
        # The first epoch (epoch 0: cold caches, cuDNN's algorithm search, lazy allocations) apart from the steady
        # state (every later epoch): the median over repeats of each repeat's median, with the 95% interval of
        # measure/statistics.hierarchical_interval (repeats, then epochs; study_a/training/summary.py); steady is
        # null when only one epoch ran, a first epoch's interval with one repeat.
        "train_time_per_sample_ms_first": pl.Float64,
        "train_time_per_sample_ms_first_low": pl.Float64,
        "train_time_per_sample_ms_first_high": pl.Float64,
        "train_time_per_sample_ms_steady": pl.Float64,
        "train_time_per_sample_ms_steady_low": pl.Float64,
        "train_time_per_sample_ms_steady_high": pl.Float64,
        "train_time_repeats": pl.Int64,     # the repeats the train intervals rest on
        "eval_time_per_sample_ms_first": pl.Float64,
        "eval_time_per_sample_ms_first_low": pl.Float64,
        "eval_time_per_sample_ms_first_high": pl.Float64,
        "eval_time_per_sample_ms_steady": pl.Float64,
        "eval_time_per_sample_ms_steady_low": pl.Float64,
        "eval_time_per_sample_ms_steady_high": pl.Float64,
        "eval_time_repeats": pl.Int64,
        "epoch_time_s_mean": pl.Float64,
        "mem_used_mib_max": pl.Float64,     # NVML, max over every phase
        "alloc_peak_mib_max": pl.Float64,   # allocator peak, max over every phase
        "gpu_util_train_mean_pct": pl.Float64,  # NVML utilisation, mean over the train phases' means
    },
}
