// Stub libmlx5.so.1: every symbol Debian 12's rdma-core 44 libmlx5.so.1.24.44.0 exports, with
// the same version nodes (libmlx5.map), each failing as the real library does for a device that
// is not an mlx5 one (see stub.h). tests/abi/check_exports.py compares the result with Debian's.
//
// The table was generated once from `readelf --dyn-syms` of Debian's library and the prototypes
// of <infiniband/mlx5dv.h>; it is grouped by version node, in the order of the map. Two entries
// are not plain errno stubs: mlx5dv_devx_get_event returns a byte count and
// mlx5dv_vfio_get_events_fd a file descriptor, so both fail with -1 and errno.

#include <infiniband/mlx5dv.h>

#include <type_traits>

#include "stub.h"

// ---- MLX5_1.0 ----
WHARF_STUB_INT(mlx5dv_query_device, struct ibv_context*, struct mlx5dv_context*)

// ---- MLX5_1.1 ----
WHARF_STUB_PTR(struct ibv_cq_ex*, mlx5dv_create_cq, struct ibv_context*,
               struct ibv_cq_init_attr_ex*, struct mlx5dv_cq_init_attr*)

// ---- MLX5_1.2 ----
// mlx5dv_init_obj has two versions, like Debian's: the default @@MLX5_1.2 and the compat
// @MLX5_1.0 of binaries built before MLX5_1.2. Both are bound explicitly (see the map).
WHARF_STUB_INT(wharf_stub_mlx5dv_init_obj_1_2, struct mlx5dv_obj*, uint64_t)
WHARF_STUB_SYMVER(wharf_stub_mlx5dv_init_obj_1_2, "mlx5dv_init_obj@@MLX5_1.2");
WHARF_STUB_INT(wharf_stub_mlx5dv_init_obj_1_0, struct mlx5dv_obj*, uint64_t)
WHARF_STUB_SYMVER(wharf_stub_mlx5dv_init_obj_1_0, "mlx5dv_init_obj@MLX5_1.0");
static_assert(
    std::is_same_v<decltype(&mlx5dv_init_obj), decltype(&wharf_stub_mlx5dv_init_obj_1_2)>);
WHARF_STUB_INT(mlx5dv_set_context_attr, struct ibv_context*, enum mlx5dv_set_ctx_attr_type, void*)

// ---- MLX5_1.3 ----
WHARF_STUB_PTR(struct ibv_qp*, mlx5dv_create_qp, struct ibv_context*, struct ibv_qp_init_attr_ex*,
               struct mlx5dv_qp_init_attr*)
WHARF_STUB_PTR(struct ibv_wq*, mlx5dv_create_wq, struct ibv_context*, struct ibv_wq_init_attr*,
               struct mlx5dv_wq_init_attr*)

// ---- MLX5_1.4 ----
WHARF_STUB_INT(mlx5dv_get_clock_info, struct ibv_context*, struct mlx5dv_clock_info*)

// ---- MLX5_1.5 ----
WHARF_STUB_PTR(struct ibv_flow_action*, mlx5dv_create_flow_action_esp, struct ibv_context*,
               struct ibv_flow_action_esp_attr*, struct mlx5dv_flow_action_esp*)

// ---- MLX5_1.6 ----
WHARF_STUB_PTR(struct ibv_flow*, mlx5dv_create_flow, struct mlx5dv_flow_matcher*,
               struct mlx5dv_flow_match_parameters*, size_t, struct mlx5dv_flow_action_attr[])
WHARF_STUB_PTR(struct mlx5dv_flow_matcher*, mlx5dv_create_flow_matcher, struct ibv_context*,
               struct mlx5dv_flow_matcher_attr*)
WHARF_STUB_INT(mlx5dv_destroy_flow_matcher, struct mlx5dv_flow_matcher*)

// ---- MLX5_1.7 ----
WHARF_STUB_PTR(struct ibv_flow_action*, mlx5dv_create_flow_action_modify_header,
               struct ibv_context*, size_t, uint64_t[], enum mlx5_ib_uapi_flow_table_type)
WHARF_STUB_PTR(struct ibv_flow_action*, mlx5dv_create_flow_action_packet_reformat,
               struct ibv_context*, size_t, void*,
               enum mlx5_ib_uapi_flow_action_packet_reformat_type,
               enum mlx5_ib_uapi_flow_table_type)
WHARF_STUB_PTR(struct mlx5dv_devx_uar*, mlx5dv_devx_alloc_uar, struct ibv_context*, uint32_t)
WHARF_STUB_VOID(mlx5dv_devx_free_uar, struct mlx5dv_devx_uar*)
WHARF_STUB_INT(mlx5dv_devx_general_cmd, struct ibv_context*, const void*, size_t, void*, size_t)
WHARF_STUB_PTR(struct mlx5dv_devx_obj*, mlx5dv_devx_obj_create, struct ibv_context*, const void*,
               size_t, void*, size_t)
WHARF_STUB_INT(mlx5dv_devx_obj_destroy, struct mlx5dv_devx_obj*)
WHARF_STUB_INT(mlx5dv_devx_obj_modify, struct mlx5dv_devx_obj*, const void*, size_t, void*, size_t)
WHARF_STUB_INT(mlx5dv_devx_obj_query, struct mlx5dv_devx_obj*, const void*, size_t, void*, size_t)
WHARF_STUB_INT(mlx5dv_devx_query_eqn, struct ibv_context*, uint32_t, uint32_t*)
WHARF_STUB_INT(mlx5dv_devx_umem_dereg, struct mlx5dv_devx_umem*)
WHARF_STUB_PTR(struct mlx5dv_devx_umem*, mlx5dv_devx_umem_reg, struct ibv_context*, void*, size_t,
               uint32_t)
WHARF_STUB_PTR(struct ibv_context*, mlx5dv_open_device, struct ibv_device*,
               struct mlx5dv_context_attr*)

// ---- MLX5_1.8 ----
WHARF_STUB_INT(mlx5dv_devx_cq_modify, struct ibv_cq*, const void*, size_t, void*, size_t)
WHARF_STUB_INT(mlx5dv_devx_cq_query, struct ibv_cq*, const void*, size_t, void*, size_t)
WHARF_STUB_INT(mlx5dv_devx_ind_tbl_modify, struct ibv_rwq_ind_table*, const void*, size_t, void*,
               size_t)
WHARF_STUB_INT(mlx5dv_devx_ind_tbl_query, struct ibv_rwq_ind_table*, const void*, size_t, void*,
               size_t)
WHARF_STUB_INT(mlx5dv_devx_qp_modify, struct ibv_qp*, const void*, size_t, void*, size_t)
WHARF_STUB_INT(mlx5dv_devx_qp_query, struct ibv_qp*, const void*, size_t, void*, size_t)
WHARF_STUB_INT(mlx5dv_devx_srq_modify, struct ibv_srq*, const void*, size_t, void*, size_t)
WHARF_STUB_INT(mlx5dv_devx_srq_query, struct ibv_srq*, const void*, size_t, void*, size_t)
WHARF_STUB_INT(mlx5dv_devx_wq_modify, struct ibv_wq*, const void*, size_t, void*, size_t)
WHARF_STUB_INT(mlx5dv_devx_wq_query, struct ibv_wq*, const void*, size_t, void*, size_t)
WHARF_STUB_FALSE(mlx5dv_is_supported, struct ibv_device*)

// ---- MLX5_1.9 ----
WHARF_STUB_PTR(struct mlx5dv_devx_cmd_comp*, mlx5dv_devx_create_cmd_comp, struct ibv_context*)
WHARF_STUB_VOID(mlx5dv_devx_destroy_cmd_comp, struct mlx5dv_devx_cmd_comp*)
WHARF_STUB_INT(mlx5dv_devx_get_async_cmd_comp, struct mlx5dv_devx_cmd_comp*,
               struct mlx5_ib_uapi_devx_async_cmd_hdr*, size_t)
WHARF_STUB_INT(mlx5dv_devx_obj_query_async, struct mlx5dv_devx_obj*, const void*, size_t, size_t,
               uint64_t, struct mlx5dv_devx_cmd_comp*)

// ---- MLX5_1.10 ----
WHARF_STUB_PTR(struct ibv_dm*, mlx5dv_alloc_dm, struct ibv_context*, struct ibv_alloc_dm_attr*,
               struct mlx5dv_alloc_dm_attr*)
WHARF_STUB_PTR(struct mlx5dv_mkey*, mlx5dv_create_mkey, struct mlx5dv_mkey_init_attr*)
WHARF_STUB_INT(mlx5dv_destroy_mkey, struct mlx5dv_mkey*)
WHARF_STUB_PTR(struct mlx5dv_dr_action*, mlx5dv_dr_action_create_dest_ibv_qp, struct ibv_qp*)
WHARF_STUB_PTR(struct mlx5dv_dr_action*, mlx5dv_dr_action_create_dest_table,
               struct mlx5dv_dr_table*)
WHARF_STUB_PTR(struct mlx5dv_dr_action*, mlx5dv_dr_action_create_dest_vport,
               struct mlx5dv_dr_domain*, uint32_t)
WHARF_STUB_PTR(struct mlx5dv_dr_action*, mlx5dv_dr_action_create_drop, void)
WHARF_STUB_PTR(struct mlx5dv_dr_action*, mlx5dv_dr_action_create_flow_counter,
               struct mlx5dv_devx_obj*, uint32_t)
WHARF_STUB_PTR(struct mlx5dv_dr_action*, mlx5dv_dr_action_create_modify_header,
               struct mlx5dv_dr_domain*, uint32_t, size_t, __be64[])
WHARF_STUB_PTR(struct mlx5dv_dr_action*, mlx5dv_dr_action_create_packet_reformat,
               struct mlx5dv_dr_domain*, uint32_t,
               enum mlx5_ib_uapi_flow_action_packet_reformat_type, size_t, void*)
WHARF_STUB_PTR(struct mlx5dv_dr_action*, mlx5dv_dr_action_create_tag, uint32_t)
WHARF_STUB_INT(mlx5dv_dr_action_destroy, struct mlx5dv_dr_action*)
WHARF_STUB_PTR(struct mlx5dv_dr_domain*, mlx5dv_dr_domain_create, struct ibv_context*,
               enum mlx5dv_dr_domain_type)
WHARF_STUB_INT(mlx5dv_dr_domain_destroy, struct mlx5dv_dr_domain*)
WHARF_STUB_INT(mlx5dv_dr_domain_sync, struct mlx5dv_dr_domain*, uint32_t)
WHARF_STUB_PTR(struct mlx5dv_dr_matcher*, mlx5dv_dr_matcher_create, struct mlx5dv_dr_table*,
               uint16_t, uint8_t, struct mlx5dv_flow_match_parameters*)
WHARF_STUB_INT(mlx5dv_dr_matcher_destroy, struct mlx5dv_dr_matcher*)
WHARF_STUB_PTR(struct mlx5dv_dr_rule*, mlx5dv_dr_rule_create, struct mlx5dv_dr_matcher*,
               struct mlx5dv_flow_match_parameters*, size_t, struct mlx5dv_dr_action*[])
WHARF_STUB_INT(mlx5dv_dr_rule_destroy, struct mlx5dv_dr_rule*)
WHARF_STUB_PTR(struct mlx5dv_dr_table*, mlx5dv_dr_table_create, struct mlx5dv_dr_domain*, uint32_t)
WHARF_STUB_INT(mlx5dv_dr_table_destroy, struct mlx5dv_dr_table*)
WHARF_STUB_PTR(struct mlx5dv_qp_ex*, mlx5dv_qp_ex_from_ibv_qp_ex, struct ibv_qp_ex*)

// ---- MLX5_1.11 ----
WHARF_STUB_PTR(struct mlx5dv_devx_event_channel*, mlx5dv_devx_create_event_channel,
               struct ibv_context*, enum mlx5_ib_uapi_devx_create_event_channel_flags)
WHARF_STUB_VOID(mlx5dv_devx_destroy_event_channel, struct mlx5dv_devx_event_channel*)
WHARF_STUB_NEG(ssize_t, mlx5dv_devx_get_event, struct mlx5dv_devx_event_channel*,
               struct mlx5_ib_uapi_devx_async_event_hdr*, size_t)
WHARF_STUB_INT(mlx5dv_devx_subscribe_devx_event, struct mlx5dv_devx_event_channel*,
               struct mlx5dv_devx_obj*, uint16_t, uint16_t[], uint64_t)
WHARF_STUB_INT(mlx5dv_devx_subscribe_devx_event_fd, struct mlx5dv_devx_event_channel*, int,
               struct mlx5dv_devx_obj*, uint16_t)

// ---- MLX5_1.12 ----
WHARF_STUB_PTR(struct mlx5dv_var*, mlx5dv_alloc_var, struct ibv_context*, uint32_t)
WHARF_STUB_PTR(struct mlx5dv_dr_action*, mlx5dv_dr_action_create_flow_meter,
               struct mlx5dv_dr_flow_meter_attr*)
WHARF_STUB_INT(mlx5dv_dr_action_modify_flow_meter, struct mlx5dv_dr_action*,
               struct mlx5dv_dr_flow_meter_attr*, __be64)
WHARF_STUB_INT(mlx5dv_dump_dr_domain, FILE*, struct mlx5dv_dr_domain*)
WHARF_STUB_INT(mlx5dv_dump_dr_matcher, FILE*, struct mlx5dv_dr_matcher*)
WHARF_STUB_INT(mlx5dv_dump_dr_rule, FILE*, struct mlx5dv_dr_rule*)
WHARF_STUB_INT(mlx5dv_dump_dr_table, FILE*, struct mlx5dv_dr_table*)
WHARF_STUB_VOID(mlx5dv_free_var, struct mlx5dv_var*)

// ---- MLX5_1.13 ----
WHARF_STUB_PTR(struct mlx5dv_pp*, mlx5dv_pp_alloc, struct ibv_context*, size_t, const void*,
               uint32_t)
WHARF_STUB_VOID(mlx5dv_pp_free, struct mlx5dv_pp*)

// ---- MLX5_1.14 ----
WHARF_STUB_PTR(struct mlx5dv_dr_action*, mlx5dv_dr_action_create_default_miss, void)
WHARF_STUB_VOID(mlx5dv_dr_domain_set_reclaim_device_memory, struct mlx5dv_dr_domain*, bool)
WHARF_STUB_INT(mlx5dv_modify_qp_lag_port, struct ibv_qp*, uint8_t)
WHARF_STUB_INT(mlx5dv_query_qp_lag_port, struct ibv_qp*, uint8_t*, uint8_t*)

// ---- MLX5_1.15 ----
WHARF_STUB_PTR(struct mlx5dv_dr_action*, mlx5dv_dr_action_create_dest_devx_tir,
               struct mlx5dv_devx_obj*)

// ---- MLX5_1.16 ----
WHARF_STUB_PTR(struct mlx5dv_dr_action*, mlx5dv_dr_action_create_dest_array,
               struct mlx5dv_dr_domain*, size_t, struct mlx5dv_dr_action_dest_attr*[])
WHARF_STUB_PTR(struct mlx5dv_dr_action*, mlx5dv_dr_action_create_flow_sampler,
               struct mlx5dv_dr_flow_sampler_attr*)

// ---- MLX5_1.17 ----
WHARF_STUB_PTR(struct mlx5dv_dr_action*, mlx5dv_dr_action_create_aso, struct mlx5dv_dr_domain*,
               struct mlx5dv_devx_obj*, uint32_t, uint32_t, uint8_t)
WHARF_STUB_PTR(struct mlx5dv_dr_action*, mlx5dv_dr_action_create_pop_vlan, void)
WHARF_STUB_PTR(struct mlx5dv_dr_action*, mlx5dv_dr_action_create_push_vlan,
               struct mlx5dv_dr_domain*, __be32)
WHARF_STUB_INT(mlx5dv_dr_action_modify_aso, struct mlx5dv_dr_action*, uint32_t, uint32_t, uint8_t)
WHARF_STUB_INT(mlx5dv_modify_qp_sched_elem, struct ibv_qp*, const struct mlx5dv_sched_leaf*,
               const struct mlx5dv_sched_leaf*)
WHARF_STUB_INT(mlx5dv_modify_qp_udp_sport, struct ibv_qp*, uint16_t)
WHARF_STUB_PTR(struct mlx5dv_sched_leaf*, mlx5dv_sched_leaf_create, struct ibv_context*,
               const struct mlx5dv_sched_attr*)
WHARF_STUB_INT(mlx5dv_sched_leaf_destroy, struct mlx5dv_sched_leaf*)
WHARF_STUB_INT(mlx5dv_sched_leaf_modify, struct mlx5dv_sched_leaf*, const struct mlx5dv_sched_attr*)
WHARF_STUB_PTR(struct mlx5dv_sched_node*, mlx5dv_sched_node_create, struct ibv_context*,
               const struct mlx5dv_sched_attr*)
WHARF_STUB_INT(mlx5dv_sched_node_destroy, struct mlx5dv_sched_node*)
WHARF_STUB_INT(mlx5dv_sched_node_modify, struct mlx5dv_sched_node*, const struct mlx5dv_sched_attr*)

// ---- MLX5_1.18 ----
WHARF_STUB_INT(mlx5dv_reserved_qpn_alloc, struct ibv_context*, uint32_t*)
WHARF_STUB_INT(mlx5dv_reserved_qpn_dealloc, struct ibv_context*, uint32_t)

// ---- MLX5_1.19 ----
WHARF_STUB_INT(_mlx5dv_query_port, struct ibv_context*, uint32_t, struct mlx5_ib_uapi_query_port*,
               size_t)
WHARF_STUB_PTR(struct mlx5dv_devx_umem*, mlx5dv_devx_umem_reg_ex, struct ibv_context*,
               struct mlx5dv_devx_umem_in*)
WHARF_STUB_PTR(void*, mlx5dv_dm_map_op_addr, struct ibv_dm*, uint8_t)

// ---- MLX5_1.20 ----
WHARF_STUB_INT(_mlx5dv_mkey_check, struct mlx5dv_mkey*, struct mlx5dv_mkey_err*, size_t)
WHARF_STUB_VOID(mlx5dv_dr_domain_allow_duplicate_rules, struct mlx5dv_dr_domain*, bool)
WHARF_STUB_INT(mlx5dv_map_ah_to_qp, struct ibv_ah*, uint32_t)
WHARF_STUB_INT(mlx5dv_qp_cancel_posted_send_wrs, struct mlx5dv_qp_ex*, uint64_t)

// ---- MLX5_1.21 ----
WHARF_STUB_INT(mlx5dv_crypto_login, struct ibv_context*, struct mlx5dv_crypto_login_attr*)
WHARF_STUB_INT(mlx5dv_crypto_login_query_state, struct ibv_context*,
               enum mlx5dv_crypto_login_state*)
WHARF_STUB_INT(mlx5dv_crypto_logout, struct ibv_context*)
WHARF_STUB_INT(mlx5dv_dci_stream_id_reset, struct ibv_qp*, uint16_t)
WHARF_STUB_PTR(struct mlx5dv_dek*, mlx5dv_dek_create, struct ibv_context*,
               struct mlx5dv_dek_init_attr*)
WHARF_STUB_INT(mlx5dv_dek_destroy, struct mlx5dv_dek*)
WHARF_STUB_INT(mlx5dv_dek_query, struct mlx5dv_dek*, struct mlx5dv_dek_attr*)
WHARF_STUB_PTR(struct mlx5dv_dr_action*, mlx5dv_dr_action_create_dest_ib_port,
               struct mlx5dv_dr_domain*, uint32_t)
WHARF_STUB_INT(mlx5dv_dr_matcher_set_layout, struct mlx5dv_dr_matcher*,
               struct mlx5dv_dr_matcher_layout*)
WHARF_STUB_PTR(struct ibv_device**, mlx5dv_get_vfio_device_list, struct mlx5dv_vfio_context_attr*)
WHARF_STUB_NEG(int, mlx5dv_vfio_get_events_fd, struct ibv_context*)
WHARF_STUB_INT(mlx5dv_vfio_process_events, struct ibv_context*)

// ---- MLX5_1.22 ----
WHARF_STUB_INT(mlx5dv_dr_aso_other_domain_link, struct mlx5dv_devx_obj*, struct mlx5dv_dr_domain*,
               struct mlx5dv_dr_domain*, uint32_t, uint8_t)
WHARF_STUB_INT(mlx5dv_dr_aso_other_domain_unlink, struct mlx5dv_devx_obj*, struct mlx5dv_dr_domain*)

// ---- MLX5_1.23 ----
WHARF_STUB_PTR(struct mlx5dv_devx_msi_vector*, mlx5dv_devx_alloc_msi_vector, struct ibv_context*)
WHARF_STUB_PTR(struct mlx5dv_devx_eq*, mlx5dv_devx_create_eq, struct ibv_context*, const void*,
               size_t, void*, size_t)
WHARF_STUB_INT(mlx5dv_devx_destroy_eq, struct mlx5dv_devx_eq*)
WHARF_STUB_INT(mlx5dv_devx_free_msi_vector, struct mlx5dv_devx_msi_vector*)

// ---- MLX5_1.24 ----
WHARF_STUB_PTR(struct mlx5dv_steering_anchor*, mlx5dv_create_steering_anchor, struct ibv_context*,
               struct mlx5dv_steering_anchor_attr*)
WHARF_STUB_PTR(struct mlx5dv_crypto_login_obj*, mlx5dv_crypto_login_create, struct ibv_context*,
               struct mlx5dv_crypto_login_attr_ex*)
WHARF_STUB_INT(mlx5dv_crypto_login_destroy, struct mlx5dv_crypto_login_obj*)
WHARF_STUB_INT(mlx5dv_crypto_login_query, struct mlx5dv_crypto_login_obj*,
               struct mlx5dv_crypto_login_query_attr*)
WHARF_STUB_INT(mlx5dv_destroy_steering_anchor, struct mlx5dv_steering_anchor*)
WHARF_STUB_PTR(struct mlx5dv_dr_action*, mlx5dv_dr_action_create_dest_root_table,
               struct mlx5dv_dr_table*, uint16_t)
