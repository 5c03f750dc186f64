
// A model-only file: shapes without any Dataflow block (MAESTRO's data/model style).
Network tiny_resnet_stage {
	Layer CONV2_1_1 {
		Type: CONV
		Stride { X: 1, Y: 1 }
		Dimensions { K: 16, C: 32, R: 1, S: 1, Y: 14, X: 14 }

	}

	Layer CONV2_1_2 {
		Type: CONV
		Stride { X: 2, Y: 2 }
		Dimensions { K: 16, C: 16, R: 3, S: 3, Y: 15, X: 15 }
	}

	Layer CONV2_1_Residual {
		Type: DSCONV
		Stride { X: 1, Y: 1 }
		Dimensions { K: 1, C: 16, R: 1, S: 1, Y: 7, X: 7 }
	}

	Layer CONV2_1_Residual {   // MAESTRO's own files repeat names like this
		Type: DSCONV
		Dimensions { K: 1, C: 16, R: 1, S: 1, Y: 7, X: 7 }
	}
}
