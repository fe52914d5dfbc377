#!/bin/sh
# PID 1 of the VM of Tests/VM/vm_power_cut.py. The kernel's command line says what to do:
# folio.mode=write (start foliod and write until the host cuts the power) or folio.mode=check
# (start foliod on what the disk held, report it, power off); folio.cycle=N numbers the ids;
# folio.durability=full|relaxed|none is foliod's --durability; folio.args=A,B,... are more arguments.
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mount -t tmpfs tmpfs /run
mode=$(sed -n 's/.*folio\.mode=\([a-z]*\).*/\1/p' /proc/cmdline)
cycle=$(sed -n 's/.*folio\.cycle=\([0-9]*\).*/\1/p' /proc/cmdline)
durability=$(sed -n 's/.*folio\.durability=\([a-z]*\).*/\1/p' /proc/cmdline)
args=$(sed -n 's/.*folio\.args=\([^ ]*\).*/\1/p' /proc/cmdline | tr ',' ' ')
stty -F /dev/ttyS1 raw -echo 2>/dev/null
export LD_LIBRARY_PATH=/opt/folio/lib
mkdir -p /var/lib/folio
echo "folio-init: mode $mode cycle $cycle"
/opt/folio/bin/foliod --data /var/lib/folio --socket /run/folio.sock --durability "${durability:-full}" $args &
foliod=$!
i=0
while [ ! -S /run/folio.sock ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
python3 /opt/folio/guest_load.py "$mode" /run/folio.sock "$cycle" /dev/ttyS1
echo "folio-init: load ended with $?"
kill -TERM $foliod
wait $foliod
echo "folio-init: foliod ended with $?"
sync
echo o > /proc/sysrq-trigger
sleep 10
