"""What several tuner tests share: a float32 scan's tuning key and a fixed
current policy (not read from tuning_db, which the tuner rewrites)."""

SCAN_KEY = {"value_size": 4, "accum": "float32", "op": "add", "offset_size": 4,
            "by_key": False}
SCAN_BASE = {"block_threads": 1024, "items_per_thread": 32, "mode": 3, "exact_mode": 2,
             "blocks_per_sm": 4, "lookback_window": 16, "group_tiles": 32, "group_sqrt": 0,
             "exclusive_inverse": 0, "exclusive_pairs": 0, "load_ahead": 0, "split_status": 0,
             "small_items": 1 << 24, "small_block_threads": 256, "one_launch_max_items": 0,
             "one_launch_block_threads": 512, "one_launch_items_per_thread": 16,
             "vector_width": 0}
