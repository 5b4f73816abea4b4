#!/usr/bin/env python3
"""Adds the lock entries npm leaves out for msgpackr-extract's other-platform binaries.

The npm registry reachable here does not serve those packages, so `npm install` omits them from
package-lock.json, and `npm ci` then refuses the lock as out of sync. The entries only name the
packages (npm skips them on other platforms), so nothing is downloaded. Run after `npm install`.
"""
import json
import pathlib

path = pathlib.Path(__file__).resolve().parent.parent / 'package-lock.json'
lock = json.loads(path.read_text())
packages = lock['packages']
extract = packages.get('node_modules/msgpackr-extract', {})
for name, version in extract.get('optionalDependencies', {}).items():
    key = f'node_modules/{name}'
    if key in packages:
        continue
    os_name, cpu = name.rsplit('-', 2)[-2:]
    packages[key] = {'version': version, 'cpu': [cpu], 'license': 'MIT', 'optional': True, 'os': [os_name]}

path.write_text(json.dumps(lock, indent=2) + '\n')
