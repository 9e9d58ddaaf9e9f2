/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * device_host/nvshmem_tensor.h (kinet) - NVSHMEM 3.4's tile-granular API
 * (nvshmemx::Tensor and its layouts; the tile collectives) for CUDA C++.
 *
 * The tensor types are real: a tile is a base pointer and a layout (a
 * shape and a stride, tuples whose elements are ints or compile-time
 * ConstInt values), usable on host and device.
 *
 * The tile collectives are refused at run time: every algorithm NVSHMEM
 * 3.4 offers for them (tile_coll_algo_t) is an NVLink SHARP (NVLS) multicast
 * algorithm, and kinet has no multicast (docs/shmem.md, "Not covered").
 * A call does nothing to the tensors, keeps -ENOTSUP as the PE's first error
 * (kn_shmem_error, kinet_shmem_error), prints one line from the first thread
 * of the grid and returns -1 (NVSHMEM's return 0); tile_collective_wait does
 * the same, so that a program checking either sees the failure.
 */
#ifndef KINET_NVSHMEM_TENSOR_H
#define KINET_NVSHMEM_TENSOR_H

#if !defined(__CUDACC__) || !defined(__cplusplus)
#error "device_host/nvshmem_tensor.h (the tile API) is for CUDA C++ (nvcc)"
#endif

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <cuda/std/tuple>
#include <cuda/std/type_traits>
#include "../nvshmem.h"

/* An int known at compile time (a static dimension or stride). */
template <int v> struct ConstInt : cuda::std::integral_constant<int, v> {
	__host__ __device__ constexpr operator int() const
	{
		return v;
	}
};

/* get<i>(shape) as NVSHMEM's programs write it, unqualified */
using cuda::std::get;

namespace nvshmemx {

template <class... D> using shape = cuda::std::tuple<D...>;
template <class... D> using stride = cuda::std::tuple<D...>;

template <class... D> __host__ __device__ constexpr shape<D...> make_shape(D const &...d)
{
	return shape<D...>(d...);
}

template <class... D> __host__ __device__ constexpr stride<D...> make_stride(D const &...d)
{
	return stride<D...>(d...);
}

/* A shape and a stride of as many dimensions. */
template <class Shape, class Stride> struct Layout {
	Shape shape_;
	Stride stride_;
	__host__ __device__ constexpr Layout(Shape const &s = {}, Stride const &d = {})
		: shape_(s), stride_(d)
	{
	}
	__host__ __device__ constexpr Shape shape() const
	{
		return shape_;
	}
	__host__ __device__ constexpr Stride stride() const
	{
		return stride_;
	}
};

template <class Shape, class Stride>
__host__ __device__ constexpr Layout<Shape, Stride> make_layout(Shape const &s, Stride const &d)
{
	return Layout<Shape, Stride>(s, d);
}

/* Elements of type T at data, placed by the layout. */
template <typename T, class L> struct Tensor {
	using value_type = T;
	using layout_type = L;
	T *_data;
	const L _layout;
	__host__ __device__ constexpr Tensor(T *data, L layout) : _data(data), _layout(layout)
	{
	}
	__host__ __device__ Tensor(L layout) : _data(nullptr), _layout(layout)
	{
	}
	__host__ __device__ constexpr L layout() const
	{
		return _layout;
	}
	__host__ __device__ T *data()
	{
		return _data;
	}
	__host__ __device__ constexpr auto shape() const -> decltype(_layout.shape())
	{
		return _layout.shape();
	}
	__host__ __device__ constexpr auto stride() const -> decltype(_layout.stride())
	{
		return _layout.stride();
	}
};

/* NVSHMEM 3.4's algorithms of the tile collectives (all NVLS multicast)
 * and of tile put/get, with its values. */
typedef enum {
	NVLS_ONE_SHOT_PUSH_NBI = 0,
	NVLS_ONE_SHOT_PULL_NBI = 1,
	NVLS_TWO_SHOT_PUSH_NBI = 2,
	NVLS_TWO_SHOT_PULL_NBI = 3,
	NVSHMEMI_TILE_COLL_ALGO_SENTINEL = INT_MAX
} tile_coll_algo_t;

typedef enum {
	PEER_PUSH_NBI = 0,
	PEER_PULL_NBI = 0,
	REMOTE_PUSH_NBI = 1,
	REMOTE_PULL_NBI = 1,
	NVSHMEMI_TILE_ALGO_SENTINEL = INT_MAX
} tile_algo_t;

/* The refusal of every tile collective: -ENOTSUP kept as the PE's error, a
 * line from the grid's first thread, -1. */
static __device__ __forceinline__ int knx_tile_refuse(const char *call)
{
	knx_sh_err(knx_sh(), -ENOTSUP);
	if (!(threadIdx.x | threadIdx.y | threadIdx.z | blockIdx.x | blockIdx.y | blockIdx.z))
		printf("kinet-shmem: nvshmemx::%s: refused (-ENOTSUP): the tile collectives are "
		       "NVLink SHARP (NVLS) multicast algorithms, which kinet does not have; use "
		       "the nvshmem collectives (reduce, fcollect, broadcast)\n",
		       call);
	return -1;
}

#define KNX_TILE_OP(NAME, SUFFIX)                                                             \
	template <typename src_tensor_t, typename dst_tensor_t, typename tuple_t,             \
		  tile_coll_algo_t algo>                                                      \
	static __device__ __forceinline__ int NAME##SUFFIX(nvshmem_team_t, src_tensor_t,      \
							   dst_tensor_t, tuple_t, tuple_t,    \
							   int, uint64_t)                     \
	{                                                                                     \
		return knx_tile_refuse(#NAME #SUFFIX);                                        \
	}                                                                                     \
	template <typename src_tensor_t, typename dst_tensor_t, typename tuple_t,             \
		  tile_coll_algo_t algo>                                                      \
	static __device__ __forceinline__ int NAME##SUFFIX(nvshmem_team_t, src_tensor_t,      \
							   dst_tensor_t, tuple_t, tuple_t,    \
							   uint64_t)                          \
	{                                                                                     \
		return knx_tile_refuse(#NAME #SUFFIX);                                        \
	}
#define KNX_TILE_WAIT(SUFFIX)                                                                 \
	template <tile_coll_algo_t algo>                                                      \
	static __device__ __forceinline__ int tile_collective_wait##SUFFIX(nvshmem_team_t,    \
									   uint64_t)          \
	{                                                                                     \
		return knx_tile_refuse("tile_collective_wait" #SUFFIX);                       \
	}
#define KNX_TILE_SCOPE(SUFFIX)                                                                \
	KNX_TILE_OP(tile_sum_allreduce, SUFFIX)                                               \
	KNX_TILE_OP(tile_max_allreduce, SUFFIX)                                               \
	KNX_TILE_OP(tile_min_allreduce, SUFFIX)                                               \
	KNX_TILE_OP(tile_sum_reduce, SUFFIX)                                                  \
	KNX_TILE_OP(tile_max_reduce, SUFFIX)                                                  \
	KNX_TILE_OP(tile_min_reduce, SUFFIX)                                                  \
	KNX_TILE_OP(tile_allgather, SUFFIX)                                                   \
	KNX_TILE_OP(tile_broadcast, SUFFIX)                                                   \
	KNX_TILE_WAIT(SUFFIX)

KNX_TILE_SCOPE()
KNX_TILE_SCOPE(_warp)
KNX_TILE_SCOPE(_warpgroup)
KNX_TILE_SCOPE(_block)

#undef KNX_TILE_SCOPE
#undef KNX_TILE_WAIT
#undef KNX_TILE_OP

} /* namespace nvshmemx */

#endif
