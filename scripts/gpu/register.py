"""Make pymap's plugins visible without `pip install` (the GPU machines reach no package index):
write a minimal pymap.dist-info with the entry points of pyproject.toml into a directory on
sys.path.   python3 scripts/gpu/register.py /tmp/site"""
import os
import sys
import tomllib

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
with open(os.path.join(root, "pyproject.toml"), "rb") as fh:
    project = tomllib.load(fh)["project"]
info = os.path.join(sys.argv[1], f"pymap-{project['version']}.dist-info")
os.makedirs(info, exist_ok=True)
with open(os.path.join(info, "METADATA"), "w") as fh:
    fh.write(f"Metadata-Version: 2.1\nName: pymap\nVersion: {project['version']}\n")
with open(os.path.join(info, "entry_points.txt"), "w") as fh:
    for group, eps in project.get("entry-points", {}).items():
        fh.write(f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items()) + "\n")
    fh.write("[console_scripts]\n" + "".join(f"{k} = {v}\n" for k, v in project["scripts"].items()))
print("registered", info)
