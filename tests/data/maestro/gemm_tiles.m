// GEMMs as in MAESTRO's GNMT mappings: (M x K) x (K x N) = (M x N).
Constant MTile 2;
Constant NTile 4;
Constant KTile 16;
Network gemm_tiles {
Layer PROJ {
Type: GEMM
Dimensions { N: 64, K: 256, M: 32 }
Dataflow {
			TemporalMap(NTile,NTile) N;
			SpatialMap(MTile,MTile) M;
			TemporalMap(KTile,KTile) K;
			Cluster(KTile, P);
			TemporalMap(NTile,NTile) N;
			TemporalMap(MTile,MTile) M;
			SpatialMap(1,1) K;
		}
}
Layer SCORES {
Type: BMM
Dimensions { B: 4, K: 16, M: 32, N: 32 }
Dataflow {
			TemporalMap(1,1) B;
			SpatialMap(Sz(M),Sz(M)) M;
			TemporalMap(Sz(K),Sz(K)) K;
			TemporalMap(1,1) N;
		}
}
}
