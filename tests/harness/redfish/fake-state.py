"""Reads and changes a system of sushy-emulator's fake driver in the emulator's state store, as a person at the
machine or another client would change its power behind plugpool's back. Run with the venv's Python:

    python fake-state.py STATE_DIR show ID            prints {"power_state": ..., "pending_power": ...}
    python fake-state.py STATE_DIR set ID STATE       PowerState becomes STATE ("null": none), nothing pending
    python fake-state.py STATE_DIR settle ID          a pending Reset applies at the emulator's next read

The fake driver keeps each system as a dict in a PersistentDict (SQLite) that every request reads afresh, and
applies a Reset by recording a pending power state with an apply time 1-11 s ahead, which it applies on the
first read after that time:
https://github.com/openstack/sushy-tools/blob/2.2.0/sushy_tools/emulator/resources/systems/fakedriver.py
Exit status 3: no such system.
"""
import json
import sys

from sushy_tools.emulator.memoize import PersistentDict


def main(state_dir, command, identity, *rest):
    systems = PersistentDict()
    systems.make_permanent(state_dir, 'fakedriver')
    try:
        system = systems[identity]
    except KeyError:
        return 3
    if command == 'set':
        system['power_state'] = None if rest[0] == 'null' else rest[0]
        system['pending_power'] = None
        systems[identity] = system
    elif command == 'settle':
        if system.get('pending_power'):
            system['pending_power']['apply_time'] = 0
            systems[identity] = system
    elif command != 'show':
        return 2
    print(json.dumps({'power_state': system.get('power_state'),
                      'pending_power': system.get('pending_power')}))
    return 0


if __name__ == '__main__':
    sys.exit(main(*sys.argv[1:]))
