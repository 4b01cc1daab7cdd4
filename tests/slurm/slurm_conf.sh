# Sourced by the Slurm tests: the slurm.conf settings every test cluster shares.

# Prints them: daemons and job steps as root, munge authentication through the socket $1, process
# tracking by process group and no cgroups, no MPI or accounting, the cons_tres CPU selector. Nodes may
# declare more CPUs than the machine has (config_overrides); a job larger than its partition fails at
# once instead of pending forever (EnforcePartLimits=ALL); a node that answers again returns to service.
slurm_test_conf() {
  cat <<CONF
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$1
CredType=cred/munge
ProctrackType=proctrack/pgid
TaskPlugin=task/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
SlurmdParameters=config_overrides
EnforcePartLimits=ALL
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
CONF
}
