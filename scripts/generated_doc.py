"""What the generators of docs/reference/ share: write a generated page, or check it is current.

Used by scripts/gen_config_reference.py, gen_tools_reference.py and gen_c_api_reference.py.
"""
import os


def check_or_write(path, text, check, stale_message):
    """Writes `text` to `path` (making its folder), or with `check` compares them instead.

    Returns the exit status: 0 written or current; 1 when `check` finds `path` missing or
    different, after printing "<path> is stale: <stale_message>".
    """
    if check:
        current = None
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                current = f.read()
        if current != text:
            print("%s is stale: %s" % (path, stale_message))
            return 1
        print("%s is current" % path)
        return 0
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    print("wrote %s" % path)
    return 0
