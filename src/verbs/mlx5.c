/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mlx5.c - kinet-verbs' libmlx5.so.1: rdma-core's direct verbs (mlx5dv) for
 * kinet devices, through the double's table that libibverbs.so.1 holds
 * (kinet_verbs_ops). What is offered so far: the device query, opening a
 * device (DevX too), mlx5dv_init_obj (the software NIC's own queues,
 * doorbell records and registers), DevX general commands (QUERY_HCA_CAP),
 * and DevX objects: umem registration, UARs, CREATE_CQ, CREATE_QP (RC) and
 * its state changes, QUERY_QP, whose queues the program writes and the
 * software NIC executes from its umem. docs/verbs.md.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "nic/mlx5/ops.h"
#include "core/driver.h"

#define KV_EXPORT __attribute__((visibility("default")))

const struct kinet_mlx5_ops *kinet_verbs_ops(void);

KV_EXPORT bool mlx5dv_is_supported(struct ibv_device *dev)
{
	return dev && kinet_verbs_ops()->mlx5dv_is_supported(dev);
}

KV_EXPORT struct ibv_context *mlx5dv_open_device(struct ibv_device *dev,
						 struct mlx5dv_context_attr *attr)
{
	if (!dev) {
		errno = EINVAL;
		return NULL;
	}
	return kinet_verbs_ops()->mlx5dv_open_device(dev, attr);
}

KV_EXPORT int mlx5dv_query_device(struct ibv_context *ctx, struct mlx5dv_context *attr)
{
	if (!ctx || !attr)
		return EINVAL;
	return kinet_verbs_ops()->mlx5dv_query_device(ctx, attr);
}

KV_EXPORT int mlx5dv_init_obj(struct mlx5dv_obj *obj, uint64_t types)
{
	if (!obj)
		return EINVAL;
	return kinet_verbs_ops()->mlx5dv_init_obj(obj, types);
}

KV_EXPORT int mlx5dv_devx_general_cmd(struct ibv_context *ctx, const void *in, size_t inlen,
				      void *out, size_t outlen)
{
	if (!ctx || !in || !out)
		return EINVAL;
	return kinet_verbs_ops()->devx_general_cmd(ctx, in, inlen, out, outlen);
}

/* ---- DevX objects ---- */

/* rdma-core returns these with errno set; a NULL handle is EINVAL here
 * (rdma-core would crash on it). */
static void *bad_null(const char *verb)
{
	KLOG_ERR("kinet-verbs: %s: a NULL argument (EINVAL)", verb);
	errno = EINVAL;
	return NULL;
}

KV_EXPORT struct mlx5dv_devx_umem *mlx5dv_devx_umem_reg(struct ibv_context *ctx, void *addr,
							size_t size, uint32_t access)
{
	if (!ctx)
		return bad_null("mlx5dv_devx_umem_reg");
	return kinet_verbs_ops()->devx_umem_reg(ctx, addr, size, access);
}

KV_EXPORT struct mlx5dv_devx_umem *mlx5dv_devx_umem_reg_ex(struct ibv_context *ctx,
							   struct mlx5dv_devx_umem_in *in)
{
	if (!ctx || !in)
		return bad_null("mlx5dv_devx_umem_reg_ex");
	return kinet_verbs_ops()->devx_umem_reg_ex(ctx, in);
}

KV_EXPORT int mlx5dv_devx_umem_dereg(struct mlx5dv_devx_umem *umem)
{
	if (!umem) {
		bad_null("mlx5dv_devx_umem_dereg");
		return EINVAL;
	}
	return kinet_verbs_ops()->devx_umem_dereg(umem);
}

KV_EXPORT struct mlx5dv_devx_uar *mlx5dv_devx_alloc_uar(struct ibv_context *ctx, uint32_t flags)
{
	if (!ctx)
		return bad_null("mlx5dv_devx_alloc_uar");
	return kinet_verbs_ops()->devx_alloc_uar(ctx, flags);
}

KV_EXPORT void mlx5dv_devx_free_uar(struct mlx5dv_devx_uar *uar)
{
	if (uar)
		kinet_verbs_ops()->devx_free_uar(uar);
}

KV_EXPORT int mlx5dv_devx_query_eqn(struct ibv_context *ctx, uint32_t vector, uint32_t *eqn)
{
	if (!ctx || !eqn)
		return EINVAL;
	int rc = kinet_verbs_ops()->devx_query_eqn(ctx, vector, eqn);
	if (rc)
		KLOG_ERR("kinet-verbs: mlx5dv_devx_query_eqn: vector %u: %s (a DevX context has "
			 "one completion vector, 0)", vector, strerror(rc));
	return rc;
}

KV_EXPORT struct mlx5dv_devx_obj *mlx5dv_devx_obj_create(struct ibv_context *ctx, const void *in,
							 size_t inlen, void *out, size_t outlen)
{
	if (!ctx || !in || !out)
		return bad_null("mlx5dv_devx_obj_create");
	return kinet_verbs_ops()->devx_obj_create(ctx, in, inlen, out, outlen);
}

KV_EXPORT int mlx5dv_devx_obj_modify(struct mlx5dv_devx_obj *obj, const void *in, size_t inlen,
				     void *out, size_t outlen)
{
	return kinet_verbs_ops()->devx_obj_modify(obj, in, inlen, out, outlen);
}

KV_EXPORT int mlx5dv_devx_obj_query(struct mlx5dv_devx_obj *obj, const void *in, size_t inlen,
				    void *out, size_t outlen)
{
	return kinet_verbs_ops()->devx_obj_query(obj, in, inlen, out, outlen);
}

KV_EXPORT int mlx5dv_devx_obj_destroy(struct mlx5dv_devx_obj *obj)
{
	return kinet_verbs_ops()->devx_obj_destroy(obj);
}

/* Refused, but defined: perftest binds them at load (and uses them only
 * when asked for mlx5 QPs, signature or crypto offloads). */
static int refused(const char *verb)
{
	KLOG_ERR("kinet-verbs: %s is not supported (EOPNOTSUPP)", verb);
	return EOPNOTSUPP;
}

static void *refused_null(const char *verb)
{
	errno = refused(verb);
	return NULL;
}

/* A DCT (dynamically connected target); the rest is refused there. */
KV_EXPORT struct ibv_qp *mlx5dv_create_qp(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *a,
					  struct mlx5dv_qp_init_attr *ma)
{
	if (!kinet_verbs_ops()->mlx5dv_create_qp)
		return refused_null("mlx5dv_create_qp");
	return kinet_verbs_ops()->mlx5dv_create_qp(ctx, a, ma);
}

KV_EXPORT struct mlx5dv_mkey *mlx5dv_create_mkey(struct mlx5dv_mkey_init_attr *a)
{
	(void)a;
	return refused_null("mlx5dv_create_mkey");
}

KV_EXPORT int mlx5dv_destroy_mkey(struct mlx5dv_mkey *m)
{
	(void)m;
	return refused("mlx5dv_destroy_mkey");
}

KV_EXPORT struct mlx5dv_qp_ex *mlx5dv_qp_ex_from_ibv_qp_ex(struct ibv_qp_ex *q)
{
	(void)q;
	return refused_null("mlx5dv_qp_ex_from_ibv_qp_ex");
}

KV_EXPORT int mlx5dv_crypto_login(struct ibv_context *ctx, struct mlx5dv_crypto_login_attr *a)
{
	(void)ctx, (void)a;
	return refused("mlx5dv_crypto_login");
}

KV_EXPORT struct mlx5dv_dek *mlx5dv_dek_create(struct ibv_context *ctx,
					       struct mlx5dv_dek_init_attr *a)
{
	(void)ctx, (void)a;
	return refused_null("mlx5dv_dek_create");
}

KV_EXPORT int mlx5dv_dek_destroy(struct mlx5dv_dek *d)
{
	(void)d;
	return refused("mlx5dv_dek_destroy");
}

/* Refused, but defined: the rest of rdma-core 44's libmlx5 that pyverbs
 * (rdma-core's Python bindings and test suite) binds at load: flow steering
 * and its DR rules, VAR, packet pacing, LAG, scheduling, reserved QP numbers,
 * the port and clock queries, DCI streams, mkey checks, crypto login
 * objects, VFIO and DevX EQs. A program that calls them gets EOPNOTSUPP
 * (NULL with errno for an object) and a log line naming the call. */

KV_EXPORT struct mlx5dv_var *mlx5dv_alloc_var(struct ibv_context *context, uint32_t flags)
{
	(void)context, (void)flags;
	return refused_null("mlx5dv_alloc_var");
}

KV_EXPORT struct ibv_cq_ex *mlx5dv_create_cq(struct ibv_context *context,
					     struct ibv_cq_init_attr_ex *cq_attr,
					     struct mlx5dv_cq_init_attr *mlx5_cq_attr)
{
	(void)context, (void)cq_attr, (void)mlx5_cq_attr;
	return refused_null("mlx5dv_create_cq");
}

KV_EXPORT struct ibv_flow *mlx5dv_create_flow(struct mlx5dv_flow_matcher *matcher,
					      struct mlx5dv_flow_match_parameters *match_value,
					      size_t num_actions,
					      struct mlx5dv_flow_action_attr actions_attr[])
{
	(void)matcher, (void)match_value, (void)num_actions, (void)actions_attr;
	return refused_null("mlx5dv_create_flow");
}

KV_EXPORT struct ibv_flow_action *
mlx5dv_create_flow_action_packet_reformat(struct ibv_context *ctx, size_t data_sz, void *data,
					  enum mlx5dv_flow_action_packet_reformat_type type,
					  enum mlx5dv_flow_table_type ft_type)
{
	(void)ctx, (void)data_sz, (void)data, (void)type, (void)ft_type;
	return refused_null("mlx5dv_create_flow_action_packet_reformat");
}

KV_EXPORT struct mlx5dv_flow_matcher *
mlx5dv_create_flow_matcher(struct ibv_context *context,
			   struct mlx5dv_flow_matcher_attr *matcher_attr)
{
	(void)context, (void)matcher_attr;
	return refused_null("mlx5dv_create_flow_matcher");
}

KV_EXPORT struct mlx5dv_crypto_login_obj *
mlx5dv_crypto_login_create(struct ibv_context *context,
			   struct mlx5dv_crypto_login_attr_ex *login_attr)
{
	(void)context, (void)login_attr;
	return refused_null("mlx5dv_crypto_login_create");
}

KV_EXPORT int mlx5dv_crypto_login_destroy(struct mlx5dv_crypto_login_obj *crypto_login)
{
	(void)crypto_login;
	return refused("mlx5dv_crypto_login_destroy");
}

KV_EXPORT int mlx5dv_crypto_login_query(struct mlx5dv_crypto_login_obj *crypto_login,
					struct mlx5dv_crypto_login_query_attr *query_attr)
{
	(void)crypto_login, (void)query_attr;
	return refused("mlx5dv_crypto_login_query");
}

KV_EXPORT int mlx5dv_crypto_login_query_state(struct ibv_context *context,
					      enum mlx5dv_crypto_login_state *state)
{
	(void)context, (void)state;
	return refused("mlx5dv_crypto_login_query_state");
}

KV_EXPORT int mlx5dv_crypto_logout(struct ibv_context *context)
{
	(void)context;
	return refused("mlx5dv_crypto_logout");
}

KV_EXPORT int mlx5dv_dci_stream_id_reset(struct ibv_qp *qp, uint16_t stream_id)
{
	(void)qp, (void)stream_id;
	return refused("mlx5dv_dci_stream_id_reset");
}

KV_EXPORT int mlx5dv_dek_query(struct mlx5dv_dek *dek, struct mlx5dv_dek_attr *attr)
{
	(void)dek, (void)attr;
	return refused("mlx5dv_dek_query");
}

KV_EXPORT int mlx5dv_destroy_flow_matcher(struct mlx5dv_flow_matcher *matcher)
{
	(void)matcher;
	return refused("mlx5dv_destroy_flow_matcher");
}

KV_EXPORT struct mlx5dv_devx_msi_vector *mlx5dv_devx_alloc_msi_vector(struct ibv_context *ibctx)
{
	(void)ibctx;
	return refused_null("mlx5dv_devx_alloc_msi_vector");
}

KV_EXPORT struct mlx5dv_devx_eq *mlx5dv_devx_create_eq(struct ibv_context *ibctx, const void *in,
						       size_t inlen, void *out, size_t outlen)
{
	(void)ibctx, (void)in, (void)inlen, (void)out, (void)outlen;
	return refused_null("mlx5dv_devx_create_eq");
}

KV_EXPORT int mlx5dv_devx_destroy_eq(struct mlx5dv_devx_eq *eq)
{
	(void)eq;
	return refused("mlx5dv_devx_destroy_eq");
}

KV_EXPORT int mlx5dv_devx_free_msi_vector(struct mlx5dv_devx_msi_vector *msi)
{
	(void)msi;
	return refused("mlx5dv_devx_free_msi_vector");
}

KV_EXPORT void *mlx5dv_dm_map_op_addr(struct ibv_dm *dm, uint8_t op)
{
	(void)dm, (void)op;
	return refused_null("mlx5dv_dm_map_op_addr");
}

KV_EXPORT struct mlx5dv_dr_action *mlx5dv_dr_action_create_default_miss(void)
{
	return refused_null("mlx5dv_dr_action_create_default_miss");
}

KV_EXPORT struct mlx5dv_dr_action *
mlx5dv_dr_action_create_dest_array(struct mlx5dv_dr_domain *domain, size_t num_dest,
				   struct mlx5dv_dr_action_dest_attr *dests[])
{
	(void)domain, (void)num_dest, (void)dests;
	return refused_null("mlx5dv_dr_action_create_dest_array");
}

KV_EXPORT struct mlx5dv_dr_action *
mlx5dv_dr_action_create_dest_devx_tir(struct mlx5dv_devx_obj *devx_obj)
{
	(void)devx_obj;
	return refused_null("mlx5dv_dr_action_create_dest_devx_tir");
}

KV_EXPORT struct mlx5dv_dr_action *
mlx5dv_dr_action_create_dest_ib_port(struct mlx5dv_dr_domain *domain, uint32_t ib_port)
{
	(void)domain, (void)ib_port;
	return refused_null("mlx5dv_dr_action_create_dest_ib_port");
}

KV_EXPORT struct mlx5dv_dr_action *mlx5dv_dr_action_create_dest_ibv_qp(struct ibv_qp *ibqp)
{
	(void)ibqp;
	return refused_null("mlx5dv_dr_action_create_dest_ibv_qp");
}

KV_EXPORT struct mlx5dv_dr_action *mlx5dv_dr_action_create_dest_table(struct mlx5dv_dr_table *table)
{
	(void)table;
	return refused_null("mlx5dv_dr_action_create_dest_table");
}

KV_EXPORT struct mlx5dv_dr_action *
mlx5dv_dr_action_create_dest_vport(struct mlx5dv_dr_domain *domain, uint32_t vport)
{
	(void)domain, (void)vport;
	return refused_null("mlx5dv_dr_action_create_dest_vport");
}

KV_EXPORT struct mlx5dv_dr_action *mlx5dv_dr_action_create_drop(void)
{
	return refused_null("mlx5dv_dr_action_create_drop");
}

KV_EXPORT struct mlx5dv_dr_action *
mlx5dv_dr_action_create_flow_counter(struct mlx5dv_devx_obj *devx_obj, uint32_t offset)
{
	(void)devx_obj, (void)offset;
	return refused_null("mlx5dv_dr_action_create_flow_counter");
}

KV_EXPORT struct mlx5dv_dr_action *
mlx5dv_dr_action_create_flow_sampler(struct mlx5dv_dr_flow_sampler_attr *attr)
{
	(void)attr;
	return refused_null("mlx5dv_dr_action_create_flow_sampler");
}

KV_EXPORT struct mlx5dv_dr_action *
mlx5dv_dr_action_create_modify_header(struct mlx5dv_dr_domain *domain, uint32_t flags,
				      size_t actions_sz, __be64 actions[])
{
	(void)domain, (void)flags, (void)actions_sz, (void)actions;
	return refused_null("mlx5dv_dr_action_create_modify_header");
}

KV_EXPORT struct mlx5dv_dr_action *
mlx5dv_dr_action_create_packet_reformat(struct mlx5dv_dr_domain *domain, uint32_t flags,
					enum mlx5dv_flow_action_packet_reformat_type reformat_type,
					size_t data_sz, void *data)
{
	(void)domain, (void)flags, (void)reformat_type, (void)data_sz, (void)data;
	return refused_null("mlx5dv_dr_action_create_packet_reformat");
}

KV_EXPORT struct mlx5dv_dr_action *mlx5dv_dr_action_create_pop_vlan(void)
{
	return refused_null("mlx5dv_dr_action_create_pop_vlan");
}

KV_EXPORT struct mlx5dv_dr_action *
mlx5dv_dr_action_create_push_vlan(struct mlx5dv_dr_domain *domain, __be32 vlan_hdr)
{
	(void)domain, (void)vlan_hdr;
	return refused_null("mlx5dv_dr_action_create_push_vlan");
}

KV_EXPORT struct mlx5dv_dr_action *mlx5dv_dr_action_create_tag(uint32_t tag_value)
{
	(void)tag_value;
	return refused_null("mlx5dv_dr_action_create_tag");
}

KV_EXPORT int mlx5dv_dr_action_destroy(struct mlx5dv_dr_action *action)
{
	(void)action;
	return refused("mlx5dv_dr_action_destroy");
}

KV_EXPORT void mlx5dv_dr_domain_allow_duplicate_rules(struct mlx5dv_dr_domain *domain, bool allow)
{
	(void)domain, (void)allow;
	(void)refused("mlx5dv_dr_domain_allow_duplicate_rules");
}

KV_EXPORT struct mlx5dv_dr_domain *mlx5dv_dr_domain_create(struct ibv_context *ctx,
							   enum mlx5dv_dr_domain_type type)
{
	(void)ctx, (void)type;
	return refused_null("mlx5dv_dr_domain_create");
}

KV_EXPORT int mlx5dv_dr_domain_destroy(struct mlx5dv_dr_domain *domain)
{
	(void)domain;
	return refused("mlx5dv_dr_domain_destroy");
}

KV_EXPORT int mlx5dv_dr_domain_sync(struct mlx5dv_dr_domain *domain, uint32_t flags)
{
	(void)domain, (void)flags;
	return refused("mlx5dv_dr_domain_sync");
}

KV_EXPORT struct mlx5dv_dr_matcher *
mlx5dv_dr_matcher_create(struct mlx5dv_dr_table *table, uint16_t priority,
			 uint8_t match_criteria_enable, struct mlx5dv_flow_match_parameters *mask)
{
	(void)table, (void)priority, (void)match_criteria_enable, (void)mask;
	return refused_null("mlx5dv_dr_matcher_create");
}

KV_EXPORT int mlx5dv_dr_matcher_destroy(struct mlx5dv_dr_matcher *matcher)
{
	(void)matcher;
	return refused("mlx5dv_dr_matcher_destroy");
}

KV_EXPORT int mlx5dv_dr_matcher_set_layout(struct mlx5dv_dr_matcher *matcher,
					   struct mlx5dv_dr_matcher_layout *layout)
{
	(void)matcher, (void)layout;
	return refused("mlx5dv_dr_matcher_set_layout");
}

KV_EXPORT struct mlx5dv_dr_rule *mlx5dv_dr_rule_create(struct mlx5dv_dr_matcher *matcher,
						       struct mlx5dv_flow_match_parameters *value,
						       size_t num_actions,
						       struct mlx5dv_dr_action *actions[])
{
	(void)matcher, (void)value, (void)num_actions, (void)actions;
	return refused_null("mlx5dv_dr_rule_create");
}

KV_EXPORT int mlx5dv_dr_rule_destroy(struct mlx5dv_dr_rule *rule)
{
	(void)rule;
	return refused("mlx5dv_dr_rule_destroy");
}

KV_EXPORT struct mlx5dv_dr_table *mlx5dv_dr_table_create(struct mlx5dv_dr_domain *domain,
							 uint32_t level)
{
	(void)domain, (void)level;
	return refused_null("mlx5dv_dr_table_create");
}

KV_EXPORT int mlx5dv_dr_table_destroy(struct mlx5dv_dr_table *table)
{
	(void)table;
	return refused("mlx5dv_dr_table_destroy");
}

KV_EXPORT int mlx5dv_dump_dr_domain(FILE *fout, struct mlx5dv_dr_domain *domain)
{
	(void)fout, (void)domain;
	return refused("mlx5dv_dump_dr_domain");
}

KV_EXPORT void mlx5dv_free_var(struct mlx5dv_var *dv_var)
{
	(void)dv_var;
	(void)refused("mlx5dv_free_var");
}

KV_EXPORT int mlx5dv_get_clock_info(struct ibv_context *context,
				    struct mlx5dv_clock_info *clock_info)
{
	(void)context, (void)clock_info;
	return refused("mlx5dv_get_clock_info");
}

KV_EXPORT struct ibv_device **mlx5dv_get_vfio_device_list(struct mlx5dv_vfio_context_attr *attr)
{
	(void)attr;
	return refused_null("mlx5dv_get_vfio_device_list");
}

KV_EXPORT int mlx5dv_map_ah_to_qp(struct ibv_ah *ah, uint32_t qp_num)
{
	(void)ah, (void)qp_num;
	return refused("mlx5dv_map_ah_to_qp");
}

KV_EXPORT int _mlx5dv_mkey_check(struct mlx5dv_mkey *mkey, struct mlx5dv_mkey_err *err_info,
				 size_t err_info_size)
{
	(void)mkey, (void)err_info, (void)err_info_size;
	return refused("_mlx5dv_mkey_check");
}

KV_EXPORT int mlx5dv_modify_qp_lag_port(struct ibv_qp *qp, uint8_t port_num)
{
	(void)qp, (void)port_num;
	return refused("mlx5dv_modify_qp_lag_port");
}

KV_EXPORT int mlx5dv_modify_qp_sched_elem(struct ibv_qp *qp,
					  const struct mlx5dv_sched_leaf *requestor,
					  const struct mlx5dv_sched_leaf *responder)
{
	(void)qp, (void)requestor, (void)responder;
	return refused("mlx5dv_modify_qp_sched_elem");
}

KV_EXPORT int mlx5dv_modify_qp_udp_sport(struct ibv_qp *qp, uint16_t udp_sport)
{
	(void)qp, (void)udp_sport;
	return refused("mlx5dv_modify_qp_udp_sport");
}

KV_EXPORT struct mlx5dv_pp *mlx5dv_pp_alloc(struct ibv_context *context, size_t pp_context_sz,
					    const void *pp_context, uint32_t flags)
{
	(void)context, (void)pp_context_sz, (void)pp_context, (void)flags;
	return refused_null("mlx5dv_pp_alloc");
}

KV_EXPORT void mlx5dv_pp_free(struct mlx5dv_pp *pp)
{
	(void)pp;
	(void)refused("mlx5dv_pp_free");
}

KV_EXPORT int mlx5dv_qp_cancel_posted_send_wrs(struct mlx5dv_qp_ex *mqp, uint64_t wr_id)
{
	(void)mqp, (void)wr_id;
	return -refused("mlx5dv_qp_cancel_posted_send_wrs");
}

KV_EXPORT int _mlx5dv_query_port(struct ibv_context *context, uint32_t port_num,
				 struct mlx5dv_port *info, size_t info_len)
{
	(void)context, (void)port_num, (void)info, (void)info_len;
	return refused("_mlx5dv_query_port");
}

KV_EXPORT int mlx5dv_query_qp_lag_port(struct ibv_qp *qp, uint8_t *port_num,
				       uint8_t *active_port_num)
{
	(void)qp, (void)port_num, (void)active_port_num;
	return refused("mlx5dv_query_qp_lag_port");
}

KV_EXPORT int mlx5dv_reserved_qpn_alloc(struct ibv_context *ctx, uint32_t *qpn)
{
	(void)ctx, (void)qpn;
	return refused("mlx5dv_reserved_qpn_alloc");
}

KV_EXPORT int mlx5dv_reserved_qpn_dealloc(struct ibv_context *ctx, uint32_t qpn)
{
	(void)ctx, (void)qpn;
	return refused("mlx5dv_reserved_qpn_dealloc");
}

KV_EXPORT struct mlx5dv_sched_leaf *
mlx5dv_sched_leaf_create(struct ibv_context *context, const struct mlx5dv_sched_attr *sched_attr)
{
	(void)context, (void)sched_attr;
	return refused_null("mlx5dv_sched_leaf_create");
}

KV_EXPORT int mlx5dv_sched_leaf_destroy(struct mlx5dv_sched_leaf *leaf)
{
	(void)leaf;
	return refused("mlx5dv_sched_leaf_destroy");
}

KV_EXPORT int mlx5dv_sched_leaf_modify(struct mlx5dv_sched_leaf *leaf,
				       const struct mlx5dv_sched_attr *sched_attr)
{
	(void)leaf, (void)sched_attr;
	return refused("mlx5dv_sched_leaf_modify");
}

KV_EXPORT struct mlx5dv_sched_node *
mlx5dv_sched_node_create(struct ibv_context *context, const struct mlx5dv_sched_attr *sched_attr)
{
	(void)context, (void)sched_attr;
	return refused_null("mlx5dv_sched_node_create");
}

KV_EXPORT int mlx5dv_sched_node_destroy(struct mlx5dv_sched_node *node)
{
	(void)node;
	return refused("mlx5dv_sched_node_destroy");
}

KV_EXPORT int mlx5dv_sched_node_modify(struct mlx5dv_sched_node *node,
				       const struct mlx5dv_sched_attr *sched_attr)
{
	(void)node, (void)sched_attr;
	return refused("mlx5dv_sched_node_modify");
}

KV_EXPORT int mlx5dv_vfio_get_events_fd(struct ibv_context *ibctx)
{
	(void)ibctx;
	errno = refused("mlx5dv_vfio_get_events_fd");
	return -1;
}

KV_EXPORT int mlx5dv_vfio_process_events(struct ibv_context *context)
{
	(void)context;
	return refused("mlx5dv_vfio_process_events");
}
