#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# kinet-verbs' libibverbs.so.1 defines every symbol of rdma-core's private
# node IBVERBS_PRIVATE_34 (the names of rdma-core's libibverbs.map.in, facts
# of the ABI), and every IBVERBS_* symbol that the system's libraries loaded
# beside it (libfabric's providers: libefa, librdmacm, ...) import: they bind
# at load (BIND_NOW), so one missing name fails the whole program.
# usage: verbs_private_abi.sh LIBIBVERBS
set -u
LIB=$1
command -v readelf >/dev/null || { echo "skipped: no readelf"; exit 77; }
[ -f "$LIB" ] || { echo "FAIL: $LIB not found"; exit 1; }
defs=$(readelf -W --dyn-syms "$LIB" | awk '$7 != "UND" && $8 ~ /@/ {print $8}' | sed 's/@@*/@/')
fail=0
for n in __ioctl_final_num_attrs __verbs_log _verbs_init_and_alloc_context execute_ioctl \
  ibv_cmd_advise_mr ibv_cmd_alloc_dm ibv_cmd_alloc_mw ibv_cmd_alloc_pd ibv_cmd_attach_mcast \
  ibv_cmd_close_xrcd ibv_cmd_create_ah ibv_cmd_create_counters ibv_cmd_create_cq \
  ibv_cmd_create_cq_ex ibv_cmd_create_flow ibv_cmd_create_flow_action_esp ibv_cmd_create_qp \
  ibv_cmd_create_qp_ex2 ibv_cmd_create_qp_ex ibv_cmd_create_rwq_ind_table ibv_cmd_create_srq \
  ibv_cmd_create_srq_ex ibv_cmd_create_wq ibv_cmd_dealloc_mw ibv_cmd_dealloc_pd ibv_cmd_dereg_mr \
  ibv_cmd_destroy_ah ibv_cmd_destroy_counters ibv_cmd_destroy_cq ibv_cmd_destroy_flow \
  ibv_cmd_destroy_flow_action ibv_cmd_destroy_qp ibv_cmd_destroy_rwq_ind_table \
  ibv_cmd_destroy_srq ibv_cmd_destroy_wq ibv_cmd_detach_mcast ibv_cmd_free_dm \
  ibv_cmd_get_context ibv_cmd_modify_flow_action_esp ibv_cmd_modify_qp ibv_cmd_modify_qp_ex \
  ibv_cmd_modify_srq ibv_cmd_modify_wq ibv_cmd_open_qp ibv_cmd_open_xrcd ibv_cmd_poll_cq \
  ibv_cmd_post_recv ibv_cmd_post_send ibv_cmd_post_srq_recv ibv_cmd_query_context \
  ibv_cmd_query_device ibv_cmd_query_device_any ibv_cmd_query_device_ex ibv_cmd_query_mr \
  ibv_cmd_query_port ibv_cmd_query_qp ibv_cmd_query_srq ibv_cmd_read_counters \
  ibv_cmd_reg_dm_mr ibv_cmd_reg_dmabuf_mr ibv_cmd_reg_mr ibv_cmd_req_notify_cq \
  ibv_cmd_rereg_mr ibv_cmd_resize_cq ibv_get_fw_ver ibv_query_gid_type \
  ibv_read_ibdev_sysfs_file verbs_allow_disassociate_destroy verbs_open_device \
  verbs_register_driver_34 verbs_set_ops verbs_uninit_context verbs_init_cq ibv_cmd_modify_cq; do
  echo "$defs" | grep -qx "$n@IBVERBS_PRIVATE_34" || { echo "FAIL: $n@IBVERBS_PRIVATE_34 not defined"; fail=1; }
done
# what the system's rdma-core libraries import from libibverbs
checked=0
for f in /lib/x86_64-linux-gnu/libefa.so.1 /usr/lib/x86_64-linux-gnu/libefa.so.1 \
         /lib/x86_64-linux-gnu/librdmacm.so.1 /usr/lib/x86_64-linux-gnu/librdmacm.so.1 \
         /lib/aarch64-linux-gnu/libefa.so.1 /lib/aarch64-linux-gnu/librdmacm.so.1; do
  [ -f "$f" ] || continue
  checked=$((checked + 1))
  for s in $(readelf -W --dyn-syms "$f" | awk '$7 == "UND" && $8 ~ /@IBVERBS_/ {print $8}' | sed 's/ (.*//'); do
    echo "$defs" | grep -qx "$s" || { echo "FAIL: $f imports $s, not defined"; fail=1; }
  done
done
echo "private node checked; $checked system libraries checked"
exit $fail
