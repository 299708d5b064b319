import sys

if sys.argv[1:3] == ["step", "train"]:
    # First, before anything slow is imported (as `python -m training` does): a spot reclaim exits 75, which the
    # Argo train step retries, never 143. The training loop's own handlers take over once it starts.
    from training.preemption import install_early_exit

    install_early_exit()

from pipeline.cli import main  # noqa: E402

sys.exit(main())
