"""Fault-tolerant fine-tuning of a pretrained transformer for text classification (the demo: sentiment).

Commands (exit codes: 0 done, 75 preempted: checkpoint saved, rerun the same command to resume; 2 bad config/data):

  python -m training train --preset smoke --output runs/smoke                 # tiny random BERT, < 30 s on CPU
  python -m training train --preset demo --output runs/demo                   # pretrained MiniLM, < 4 min on 2 cores
  python -m training train --preset demo --output runs/d optim.lr=3e-5 epochs=2   # key=value overrides
  python -m training train --preset gpu --output /out --checkpoint-uri s3://BUCKET/runs/r1   # spot GPU node
  torchrun --standalone --nproc_per_node=2 -m training train --preset smoke --output runs/ddp   # DDP (gloo on CPU)
  torchrun --nnodes=2 --nproc_per_node=4 --rdzv-backend=c10d --rdzv-endpoint=HOST:29400 \\
      -m training train --preset gpu --output /out --checkpoint-uri s3://BUCKET/runs/r1          # N nodes x M GPUs
  python -m training evaluate --model runs/demo/model --preset demo --out runs/demo/eval.json
  python -m training export ...      # ONNX bundle (training/export.py)
  python -m training launch ...      # Kubernetes Job for the spot pool (training/launch.py)
  python -m training env             # environment variables the image reads
"""
