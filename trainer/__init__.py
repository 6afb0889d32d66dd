"""PyTorch training: models, objectives, the streaming loader, the loop, checkpoints, export."""
