// A small CNN in MAESTRO's DFSL, written for accelgen's reader tests.
// NVDLA-like "KCP" weight-stationary mapping: K across clusters, C across the PEs of a cluster.
Constant KTile 4;
Constant CTile 8;

Network small_cnn {
	Layer CONV1 {
		Type: CONV
		Stride { X: 2, Y: 2 }
		Dimensions { K: 16, C: 8, R: 3, S: 3, Y: 33, X: 33 }   // input sizes, no padding
		Dataflow {
			SpatialMap(1,1) K;
			TemporalMap(CTile,CTile) C;
			TemporalMap(Sz(R),Sz(R)) R;
			TemporalMap(Sz(S),Sz(S)) S;
			TemporalMap(Sz(R),1) Y;
			TemporalMap(Sz(S),1) X;
			Cluster(CTile, P);
			SpatialMap(1,1) C;
			TemporalMap(Sz(R),1) Y;
			TemporalMap(Sz(S),1) X;
			TemporalMap(Sz(R),Sz(R)) R;
			TemporalMap(Sz(S),Sz(S)) S;
		}
	}

	Layer DW2 {
		Type: DSCONV   // K is 1: every channel has its own filter
		Stride { X: 1, Y: 1 }
		Dimensions { K: 1, C: 16 R: 3, S: 3, Y: 16, X: 16 }
		Dataflow {
			SpatialMap(1,1) C;
			TemporalMap(Sz(R),1) Y;
			TemporalMap(Sz(S),1) X;
			TemporalMap(Sz(R),Sz(R)) R;
			TemporalMap(Sz(S),Sz(S)) S;
		}
	}

	Layer PW3 {
		Type: CONV
		Dimensions { N: 2, K: 32, C: 16, R: 1, S: 1, Y: 14, X: 14 }
		// no Dataflow: MAESTRO reuses the previous layer's
	}

	Layer FC4 {
		Type: GEMM
		Dimensions { N: 10, K: 6272, M: KTile }
		Dataflow {
			TemporalMap(1,1) N;
			SpatialMap(1,1) M;
			TemporalMap(64,64) K;
			Cluster(64, L);
			SpatialMap(1,1) K;
		}
	}
}
